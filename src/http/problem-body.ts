/** The problem+json body (RFC 9457) and what it may echo of a request; framework-free. */
import { containsSecret, ERROR_REGISTRY, errorDefinition, type LedgerProblem } from '@recovery-ledger/core';

/**
 * A key the answer may repeat: shaped like a field name (letters, digits, `_` and `-`, at most 40
 * characters: the longest field of this API has 35; snake or camel case: no capital followed by a
 * capital or a digit; no four digits in a row, nor six digits in all), and nothing the detector
 * flags. A token sent as a field name (`ghp_16C7e…`, `sk_live_…`, `shpat_<hex>`) fails one of
 * these, so a refusal names it `<key>`.
 */
const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_-]{0,39}$/;

function isPlainKey(segment: string): boolean {
  return (
    PLAIN_KEY.test(segment) &&
    !/[A-Z][A-Z0-9]/.test(segment) &&
    !/\d{4}/.test(segment) &&
    (segment.match(/\d/g)?.length ?? 0) < 6 &&
    !containsSecret(segment)
  );
}

/** The field path with every key that is not a plain name as `<key>`. */
export function safeFieldPath(field: string): string {
  return field.replace(/[^.[\]]+/g, (segment) => (/^\d+$/.test(segment) || isPlainKey(segment) ? segment : '<key>'));
}

/** The instance is the request's path: left out when it carries anything that looks like a secret. */
export function isSafeInstance(instance: string): boolean {
  let decoded: string;
  try {
    decoded = decodeURIComponent(instance);
  } catch {
    return false;
  }
  return !containsSecret(decoded) && !containsSecret(instance);
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/**
 * `Retry-After` never promises more than a day: a `not_before` years ahead (a tool's mistake or a
 * hostile envelope) must not tell a client to sleep for centuries. The directive in the body still
 * carries the real `not_before`.
 */
export const MAX_RETRY_AFTER_SECONDS = 86_400;

/** What a code the registry marks `retryAfter` answers when its cause named no delay. */
export const DEFAULT_RETRY_AFTER_SECONDS = 1;

/** Retry-After in seconds, the same for the header and the body; undefined when the answer has none. */
export function retryAfterOf(error: LedgerProblem): number | undefined {
  const seconds =
    error.extras.retryAfterSeconds ??
    (errorDefinition(error.code).retryAfter ? DEFAULT_RETRY_AFTER_SECONDS : undefined);
  return seconds === undefined ? undefined : Math.min(seconds, MAX_RETRY_AFTER_SECONDS);
}

export function problemBody(error: LedgerProblem, instance?: string): Record<string, unknown> {
  const { directive, state, results } = error.extras;
  const retryAfterSeconds = retryAfterOf(error);
  // A refusal names the field, never echoes what was in it: a key the client sent (an unknown
  // field named like a token) is named `<key>` when it could be a secret.
  const raw = error.extras.field;
  const field = raw === undefined ? undefined : safeFieldPath(raw);
  let detail = error.detail;
  if (raw !== undefined && field !== raw) {
    detail = detail.split(raw).join(field as string);
    // Validators also quote the key on its own ("property <key> should not exist").
    for (const segment of raw.split(/[.[\]]/))
      if (segment !== '' && safeFieldPath(segment) !== segment) detail = detail.split(segment).join('<key>');
  }
  return {
    type: `urn:recovery-ledger:problem:${error.code.toLowerCase().replace(/_/g, '-')}`,
    title: ERROR_REGISTRY[error.code].title,
    status: error.status,
    code: error.code,
    detail,
    ...(instance && error.code !== 'SECRET_IN_IDENTIFIER' && isSafeInstance(instance) ? { instance } : {}),
    ...(field ? { field } : {}),
    ...(directive ? { directive } : {}),
    ...(state ? { state } : {}),
    ...(results ? { results } : {}),
    ...(retryAfterSeconds !== undefined ? { retry_after_seconds: retryAfterSeconds } : {}),
  };
}
