import {
  STABLE_CODE_PATTERN,
  type ToolEnvelope,
  type ToolError,
  type ToolSuccess,
} from '@recovery-ledger/core/envelope';
import {
  correctInput,
  escalate,
  requestApproval,
  uncertainOutcome,
  waitAndRetry,
  type NormalizeContext,
  type NormalizedCode,
} from './envelope-builders';
import { headerValue, retryAfterMs } from './retry-after';
import { redactUpstream, safeToken, upstreamError } from './upstream-text';

/** What came back over HTTP: the status, the headers, and the body (parsed JSON, text, or nothing). */
export interface HttpResponseLike {
  status: number;
  headers?: Headers | Record<string, string | string[] | number | undefined>;
  body?: unknown;
}

export interface HttpNormalizeOptions extends NormalizeContext {
  /**
   * Provider error codes the adapter vouches for, mapped to this runtime's stable codes
   * (`{ card_declined: 'CARD_DECLINED' }`). Upstream codes not in the map are never copied: a code
   * is text too, and an upstream one could read as an instruction.
   */
  codeMap?: Readonly<Record<string, string>>;
  /**
   * The input's field names (see inputFieldsOf). The invalid `field` a provider names is reported
   * only when it is one of them; without the list no field is reported at all.
   */
  inputFields?: readonly string[];
  /** Overrides how a 2xx body is judged a failure, for a legacy API with its own convention. */
  isFailure?: (body: unknown) => boolean;
  /** The part of a 2xx body kept as the result (default: the whole body, redacted). */
  result?: (body: unknown) => unknown;
  /** The provider's id of what was written, kept as evidence (default: the body's `id`). */
  evidenceRef?: (body: unknown) => string | undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * The conventions legacy APIs use to report a failure behind a 2xx: `ok: false`,
 * `success: false`, `status: "error"`, a non-empty `error` or `errors`. docs/contract.md §2: even a 200 can
 * contain an application-level failure, and treating it as success invents a "done".
 */
export function bodySaysFailure(body: unknown): boolean {
  if (!isRecord(body)) return false;
  if (body.ok === false || body.success === false) return true;
  if (typeof body.status === 'string' && /^(error|fail|failed|failure)$/i.test(body.status)) return true;
  if (body.error !== undefined && body.error !== null && body.error !== false && body.error !== '') return true;
  return Array.isArray(body.errors) && body.errors.length > 0;
}

/** The provider's own error code, wherever the common shapes put it; only ever looked up, never copied. */
function upstreamCodes(body: unknown): string[] {
  if (!isRecord(body)) return [];
  const candidates: unknown[] = [body.code, body.error_code, body.type];
  if (isRecord(body.error)) candidates.push(body.error.code, body.error.type);
  if (typeof body.error === 'string') candidates.push(body.error);
  return candidates.filter((value): value is string => typeof value === 'string');
}

function mappedCode(body: unknown, options: HttpNormalizeOptions): string | undefined {
  const map = options.codeMap;
  if (!map) return undefined;
  for (const code of upstreamCodes(body)) {
    if (!Object.prototype.hasOwnProperty.call(map, code)) continue;
    const mapped = map[code];
    if (typeof mapped === 'string' && mapped.length <= 64 && STABLE_CODE_PATTERN.test(mapped)) return mapped;
  }
  return undefined;
}

/** The invalid field, from the shapes providers use (`field`, Stripe's `param`, RFC 9457 `invalid_params`). */
function invalidField(body: unknown, options: HttpNormalizeOptions): string | undefined {
  if (!isRecord(body) || !options.inputFields) return undefined;
  const candidates: unknown[] = [body.field, body.param];
  if (isRecord(body.error)) candidates.push(body.error.field, body.error.param);
  const first = (list: unknown): unknown => (Array.isArray(list) && isRecord(list[0]) ? list[0] : undefined);
  const firstError = first(body.errors) as Record<string, unknown> | undefined;
  if (firstError) candidates.push(firstError.field, firstError.param, firstError.path);
  const firstInvalid = first(body.invalid_params) as Record<string, unknown> | undefined;
  if (firstInvalid) candidates.push(firstInvalid.name);
  for (const candidate of candidates) {
    const token = safeToken(candidate);
    if (typeof token === 'string' && options.inputFields.includes(token)) return token;
  }
  return undefined;
}

/** An adapter-vouched code replaces the generic one; every other field stays as the status implies. */
function withCode(envelope: ToolError, code: string | undefined): ToolError {
  return code === undefined ? envelope : { ...envelope, code };
}

function success(response: HttpResponseLike, options: HttpNormalizeOptions): ToolSuccess {
  const picked = options.result ? options.result(response.body) : response.body;
  const { value: result } = redactUpstream(picked === undefined ? null : picked);
  const rawRef = options.evidenceRef
    ? options.evidenceRef(response.body)
    : isRecord(response.body)
      ? response.body.id
      : undefined;
  const evidence = safeToken(rawRef);
  return {
    ok: true,
    operation_ref: options.operationRef,
    commit_state: 'committed',
    result,
    verification: {
      checked_at: options.now.toISOString(),
      ...(evidence === undefined ? {} : { evidence_ref: String(evidence) }),
    },
  };
}

function retryLater(response: HttpResponseLike, options: HttpNormalizeOptions, code: NormalizedCode): ToolError {
  return waitAndRetry(options, code, retryAfterMs(headerValue(response.headers, 'retry-after'), options.now));
}

/**
 * "A request with this idempotency key is still being processed" (Stripe's idempotency_key_in_use)
 * says nothing about the outcome: the first request may yet commit. A key reused with other
 * parameters is a plain conflict.
 */
function isKeyStillInUse(body: unknown): boolean {
  return upstreamCodes(body).some((code) =>
    /idempoten\w*[_ -]?key[_ -]?(in[_ -]?use|in[_ -]?progress|processing)/i.test(code),
  );
}

/**
 * HTTP status and body to an envelope. Status is transport information; this maps it to workflow
 * information (seed): what is known about the commit, and what may safely happen next.
 *
 * 401 and 403 are both authorization, but not the same next step. A 401 says the runtime's own
 * credential is missing or wrong: no approval fixes that, an operator does, so it escalates. A 403
 * says the credential is fine and policy forbids this action: a person with the authority can
 * approve it, so it asks for approval (the contract's "lost approval" row), and the tool is not called
 * again until the approval is recorded.
 */
export function normalizeHttpResponse(response: HttpResponseLike, options: HttpNormalizeOptions): ToolEnvelope {
  const { status, body } = response;
  const isWrite = options.sideEffect === 'write';
  const code = mappedCode(body, options);

  if (status >= 200 && status < 300) {
    const failed = options.isFailure ? options.isFailure(body) : bodySaysFailure(body);
    if (failed) return withCode(upstreamError(options), code);
    // 202: the provider queued the write; nothing proves it happened yet.
    if (status === 202 && isWrite) return uncertainOutcome(options, 'ACCEPTED_NOT_CONFIRMED');
    return success(response, options);
  }

  switch (status) {
    case 400:
    case 422:
      return withCode(correctInput(options, 'INVALID_INPUT', invalidField(body, options)), code);
    case 404:
    case 410:
      return withCode(correctInput(options, 'RESOURCE_NOT_FOUND', invalidField(body, options)), code);
    case 413:
      return withCode(correctInput(options, 'PAYLOAD_TOO_LARGE', undefined), code);
    case 401:
      return withCode(escalate(options, 'UPSTREAM_UNAUTHENTICATED', 'authorization'), code);
    case 403:
      return withCode(requestApproval(options, 'MISSING_APPROVAL'), code);
    case 409:
      if (isWrite && isKeyStillInUse(body)) return uncertainOutcome(options);
      return withCode(escalate(options, 'CONFLICT', 'conflict'), code);
    case 412:
      return withCode(escalate(options, 'VERSION_CONFLICT', 'conflict'), code);
    case 408:
      // The server gave up waiting for the request itself: it never processed it.
      return withCode(retryLater(response, options, 'DEPENDENCY_UNAVAILABLE'), code);
    case 429:
      // A rate limiter answers before the request is processed: nothing ran, even for a write.
      return withCode(retryLater(response, options, 'RATE_LIMITED'), code);
    case 503:
      // With Retry-After the service says it is not taking requests; without it, a 503 is one more
      // 5xx that a proxy may send while the upstream keeps working.
      if (headerValue(response.headers, 'retry-after') !== undefined || !isWrite) {
        return withCode(retryLater(response, options, 'DEPENDENCY_UNAVAILABLE'), code);
      }
      return uncertainOutcome(options);
    default:
      break;
  }
  if (status >= 500) {
    // A 5xx after a write may follow a commit (a proxy's 502 while the upstream keeps working).
    return isWrite
      ? uncertainOutcome(options)
      : withCode(retryLater(response, options, 'DEPENDENCY_UNAVAILABLE'), code);
  }
  if (status >= 400) return withCode(escalate(options, 'UPSTREAM_REJECTED', 'internal'), code);
  // 1xx/3xx as a final answer: the request went out and nothing says what became of it.
  return isWrite ? uncertainOutcome(options) : escalate(options, 'UPSTREAM_ERROR', 'dependency');
}
