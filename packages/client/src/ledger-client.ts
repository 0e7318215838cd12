import { createHash, randomUUID } from 'node:crypto';
import { canonicalJson } from '@recovery-ledger/core/envelope';
import { headerValue, retryAfterMs } from './normalizers/retry-after';
import type {
  ApprovalRecordedInput,
  AttemptDispatchedInput,
  EnvelopeRecordedInput,
  EvidenceTrail,
  OperationEvents,
  OperationState,
  RecoveryItem,
  RecoveryPage,
  RunSummary,
  SideEffect,
  StepPlannedInput,
  StepPolicyInput,
  WorkAnswer,
  LeaseView,
  OperatorFactInput,
  OperatorFactsAnswer,
  OperatorFactTarget,
  SubmitAnswer,
  SubmittedEvent,
  SubmittedEventInput,
  TrustMetrics,
  VerificationRecordedInput,
} from './ledger-api.types';
import { LedgerError, LedgerInvalidRequest, LedgerUnavailable, ledgerErrorFromAnswer } from './ledger-errors';

export interface LedgerClientOptions {
  /** Where the ledger listens, e.g. `http://127.0.0.1:3000`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <key>`; leave out for a ledger in local mode. */
  apiKey?: string;
  /** Per request, each try on its own (default 10 s). */
  timeoutMs?: number;
  /** Tries after the first, for transport failures and 429 / 502 / 503 / 504 (default 3). */
  maxRetries?: number;
  /** First backoff when the answer gives no Retry-After; doubles per try, with jitter (default 200 ms). */
  retryBaseDelayMs?: number;
  /**
   * The longest wait the client takes on its own. A Retry-After beyond it is not slept through:
   * the error is thrown with `retryAfterSeconds` for the caller's scheduler (default 5 s).
   */
  maxRetryDelayMs?: number;
  /** A W3C `traceparent` for every request (a function to read the current span's). */
  traceparent?: string | (() => string | undefined);
  tracestate?: string | (() => string | undefined);
  /** Injected for tests and for runtimes with their own HTTP stack; the global fetch by default. */
  fetch?: typeof fetch;
  sleep?: (ms: number) => Promise<void>;
  /** Event ids (UUIDs); `crypto.randomUUID` by default. */
  newEventId?: () => string;
}

export interface RequestOptions {
  /** Overrides the client's trace context for this request. */
  traceparent?: string;
  tracestate?: string;
  /** The caller's own cancellation: aborting it stops the request and its retries. */
  signal?: AbortSignal;
  timeoutMs?: number;
  /** The work-feed lease the facts are submitted under (sent as `Ledger-Lease`; recorded as evidence). */
  lease?: string;
  /**
   * Sent as `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header); submits make one per call
   * when it is absent, so every resend of that call carries the same key.
   */
  idempotencyKey?: string;
}

export interface WorkQuery extends RequestOptions {
  /** The name leases are held under; one per worker process is the rule. */
  worker: string;
  /** Only these tools; every tool when absent. */
  tools?: readonly string[];
  limit?: number;
  /** Long poll: wait up to this long for an item (the ledger caps it at 30 s). */
  waitMs?: number;
  leaseMs?: number;
}

/** What a runtime gives to start a step with one call; the worker drives it from there. */
export interface StartStep<Input = unknown> {
  operationRef: string;
  runId: string;
  tool: string;
  input: Input;
  sideEffect?: SideEffect;
  policy?: StepPolicyInput;
}

export interface SubmitOptions extends RequestOptions {
  /** The stream revision the caller read (-1: no stream yet); a mismatch is REVISION_CONFLICT. */
  expectedRevision?: number;
}

export interface SingleFactOptions extends SubmitOptions {
  /** The fact's id, when the caller has chosen it already (a resend after a restart, say). */
  eventId?: string;
}

/** Reads of projections (docs/contract.md §5) may lag the log; these say how far they must have caught up. */
export interface ProjectionReadOptions extends RequestOptions {
  /** Read-your-writes: wait until the projection has applied the log this far (a submit's `position`). */
  waitForPosition?: number;
  waitTimeoutMs?: number;
  cursor?: string;
  limit?: number;
}

export interface RecoveryQuery extends ProjectionReadOptions {
  /** Only operations that have been in their state at least this long (by the ledger's clock). */
  olderThanMs?: number;
  tool?: string;
  status?: 'dispatched' | 'verifying';
}

export interface RunQuery extends ProjectionReadOptions {
  status?: string;
  tool?: string;
}

export interface TrustQuery extends ProjectionReadOptions {
  tool?: string;
}

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const RETRYABLE_STATUSES = new Set([429, 502, 503, 504]);
const MAX_RECOVERY_PAGES = 10_000;

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The query string of a projection read, in the API's snake_case; empty when nothing is asked. */
function projectionQuery(options: ProjectionReadOptions, extra: Record<string, unknown> = {}): string {
  const params = new URLSearchParams();
  const add = (name: string, value: unknown) => {
    if (value !== undefined) params.set(name, String(value));
  };
  for (const [name, value] of Object.entries(extra)) add(name, value);
  add('cursor', options.cursor);
  add('limit', options.limit);
  add('wait_for_position', options.waitForPosition);
  add('wait_timeout_ms', options.waitTimeoutMs);
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}

/** The ref is one path segment (docs/contract.md §9): `run_81/step_4` travels as `run_81%2Fstep_4`. */
export function operationPath(operationRef: string): string {
  return `/v1/operations/${encodeURIComponent(operationRef)}`;
}

interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
}

/**
 * The ledger's HTTP API (docs/contract.md §9) for runtimes. Submits are idempotent by construction: each
 * fact's `event_id` is fixed before the first send, so when the client resends after a timeout or
 * a dropped connection, the ledger sees the same fact again and appends nothing new. That is what
 * makes its own bounded retries safe, and why it may retry a submit at all.
 */
export class LedgerClient {
  private readonly baseUrl: string;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly retryBaseDelayMs: number;
  private readonly maxRetryDelayMs: number;
  private readonly fetchImpl: typeof fetch;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly eventIds: () => string;

  constructor(private readonly options: LedgerClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.maxRetries = Math.max(0, options.maxRetries ?? 3);
    this.retryBaseDelayMs = options.retryBaseDelayMs ?? 200;
    this.maxRetryDelayMs = options.maxRetryDelayMs ?? 5_000;
    this.fetchImpl = options.fetch ?? globalThis.fetch;
    this.sleep = options.sleep ?? defaultSleep;
    this.eventIds = options.newEventId ?? randomUUID;
    if (typeof this.fetchImpl !== 'function')
      throw new Error('no fetch: Node 20 or later, or options.fetch, is needed');
  }

  /** A fresh event id, for a caller that wants to hold on to it before submitting. */
  newEventId(): string {
    return this.eventIds();
  }

  // ---- submit facts --------------------------------------------------------------------------------

  /**
   * Submits facts to one operation. Ids are assigned here, before the first send; every resend
   * carries the very same body. The answer of a resend is the first answer, results `duplicate`.
   */
  async submit(
    operationRef: string,
    events: SubmittedEventInput[],
    options: SubmitOptions = {},
  ): Promise<SubmitAnswer> {
    const withIds = events.map((event) => this.withEventId(event));
    const body = {
      ...(options.expectedRevision === undefined ? {} : { expected_revision: options.expectedRevision }),
      events: withIds,
    };
    // One key per call, fixed before the first send like the body: a resend whose first answer was
    // lost gets that answer replayed, and the key can never travel with another body.
    const idempotencyKey = options.idempotencyKey ?? randomUUID();
    return (await this.request(
      'POST',
      `${operationPath(operationRef)}/events`,
      { ...options, idempotencyKey },
      body,
    )) as SubmitAnswer;
  }

  planStep(operationRef: string, data: StepPlannedInput, options: SingleFactOptions = {}): Promise<SubmitAnswer> {
    return this.submitOne(operationRef, { type: 'StepPlanned', data }, options);
  }

  /**
   * Starts a step with one call: plans it with its input, so the ledger's work feed hands it to a
   * worker that has the tool, which drives it to succeeded or escalated. Idempotent: starting the
   * same step again with the same definition changes nothing.
   */
  startStep<Input>(step: StartStep<Input>, options: SingleFactOptions = {}): Promise<SubmitAnswer> {
    return this.planStep(
      step.operationRef,
      {
        run_id: step.runId,
        tool: step.tool,
        side_effect: step.sideEffect ?? 'write',
        input_hash: createHash('sha256').update(canonicalJson(step.input)).digest('hex'),
        input: step.input,
        ...(step.policy ? { policy: step.policy } : {}),
      },
      options,
    );
  }

  /** The gate (docs/contract.md §3): a 409 LedgerRefusal means the tool must not be called. */
  dispatchAttempt(
    operationRef: string,
    data: AttemptDispatchedInput,
    options: SingleFactOptions = {},
  ): Promise<SubmitAnswer> {
    return this.submitOne(operationRef, { type: 'AttemptDispatched', data }, options);
  }

  recordEnvelope(
    operationRef: string,
    data: EnvelopeRecordedInput,
    options: SingleFactOptions = {},
  ): Promise<SubmitAnswer> {
    return this.submitOne(operationRef, { type: 'EnvelopeRecorded', data }, options);
  }

  recordVerification(
    operationRef: string,
    data: VerificationRecordedInput,
    options: SingleFactOptions = {},
  ): Promise<SubmitAnswer> {
    return this.submitOne(operationRef, { type: 'VerificationRecorded', data }, options);
  }

  recordApproval(
    operationRef: string,
    data: ApprovalRecordedInput,
    options: SingleFactOptions = {},
  ): Promise<SubmitAnswer> {
    return this.submitOne(operationRef, { type: 'ApprovalRecorded', data }, options);
  }

  /**
   * Records one operator fact (docs/contract.md §4.10; an operator key) on each operation named, in
   * one request (`POST /v1/operator-facts`, at most 100 operations: more is a LedgerError
   * TOO_MANY_OPERATIONS and nothing is decided). Each operation is decided on its own, as the
   * submit route would: the answer lists, in order, each one's answer or its refusal (with its
   * stable code), and a refusal of one leaves the others as they went. Each copy's event id and
   * the call's Idempotency-Key are fixed before the first send, so a resend records nothing twice.
   */
  async recordOperatorFacts(
    operations: readonly OperatorFactTarget[],
    fact: OperatorFactInput,
    options: RequestOptions = {},
  ): Promise<OperatorFactsAnswer> {
    const body = {
      fact,
      operations: operations.map((target) => {
        const { operationRef, eventId } =
          typeof target === 'string' ? { operationRef: target, eventId: undefined } : target;
        return { operation_ref: operationRef, event_id: this.withEventId({ ...fact, event_id: eventId }).event_id };
      }),
    };
    const idempotencyKey = options.idempotencyKey ?? randomUUID();
    return (await this.request(
      'POST',
      '/v1/operator-facts',
      { ...options, idempotencyKey },
      body,
    )) as OperatorFactsAnswer;
  }

  // ---- reads -----------------------------------------------------------------------------------------

  /** The step's state folded from its own stream (strongly consistent). */
  async getOperation(operationRef: string, options: RequestOptions = {}): Promise<OperationState> {
    return (await this.request('GET', operationPath(operationRef), options)) as OperationState;
  }

  async getEvents(
    operationRef: string,
    options: RequestOptions & { asOfRevision?: number } = {},
  ): Promise<OperationEvents> {
    const query =
      options.asOfRevision === undefined ? '' : `?as_of_revision=${encodeURIComponent(options.asOfRevision)}`;
    return (await this.request('GET', `${operationPath(operationRef)}/events${query}`, options)) as OperationEvents;
  }

  /** The evidence trail (a projection): every attempt, envelope, refusal, verification and transition. */
  async getEvidence(operationRef: string, options: ProjectionReadOptions = {}): Promise<EvidenceTrail> {
    const path = `${operationPath(operationRef)}/evidence${projectionQuery(options)}`;
    return (await this.request('GET', path, options)) as EvidenceTrail;
  }

  async getRun(runId: string, options: RunQuery = {}): Promise<RunSummary> {
    const path = `/v1/runs/${encodeURIComponent(runId)}${projectionQuery(options, { status: options.status, tool: options.tool })}`;
    return (await this.request('GET', path, options)) as RunSummary;
  }

  /** One page of operations in `dispatched` or `verifying`, oldest first. */
  async listRecovery(query: RecoveryQuery = {}): Promise<RecoveryPage> {
    const search = projectionQuery(query, { older_than_ms: query.olderThanMs, tool: query.tool, status: query.status });
    return (await this.request('GET', `/v1/recovery${search}`, query)) as RecoveryPage;
  }

  /** Every page of the recovery list, followed by its cursor until the ledger gives none. */
  async *recoveryItems(query: Omit<RecoveryQuery, 'cursor'> = {}): AsyncGenerator<RecoveryItem> {
    const seen = new Set<string>();
    let cursor: string | undefined;
    for (let page = 0; page < MAX_RECOVERY_PAGES; page++) {
      const answer = await this.listRecovery({ ...query, cursor });
      for (const item of answer.items ?? []) yield item;
      if (!answer.next_cursor) return;
      // A cursor seen twice would page forever; the list is then as complete as it will get.
      if (seen.has(answer.next_cursor)) return;
      seen.add(answer.next_cursor);
      cursor = answer.next_cursor;
    }
  }

  /** Due work, each item under a lease to `worker` (a long poll with `waitMs`). */
  async work(query: WorkQuery): Promise<WorkAnswer> {
    const params = new URLSearchParams();
    params.set('worker', query.worker);
    for (const tool of query.tools ?? []) params.append('tool', tool);
    if (query.limit !== undefined) params.set('limit', String(query.limit));
    if (query.waitMs !== undefined) params.set('wait_ms', String(query.waitMs));
    if (query.leaseMs !== undefined) params.set('lease_ms', String(query.leaseMs));
    // The request outlives the long poll it asked for.
    const timeoutMs = query.timeoutMs ?? Math.max(this.timeoutMs, (query.waitMs ?? 0) + 10_000);
    return (await this.request('GET', `/v1/work?${params.toString()}`, { ...query, timeoutMs })) as WorkAnswer;
  }

  /** Which worker holds the operation now, and until when (any reader of the tenant). */
  async getLease(operationRef: string, options: RequestOptions = {}): Promise<LeaseView> {
    return (await this.request('GET', `${operationPath(operationRef)}/lease`, options)) as LeaseView;
  }

  /** Who holds each of up to 100 operations, in one request. */
  async getLeases(
    operationRefs: readonly string[],
    options: RequestOptions = {},
  ): Promise<{ items: Array<LeaseView & { operation_ref: string }> }> {
    const params = new URLSearchParams();
    for (const ref of operationRefs) params.append('operation_ref', ref);
    return (await this.request('GET', `/v1/leases?${params.toString()}`, options)) as {
      items: Array<LeaseView & { operation_ref: string }>;
    };
  }

  /** Extends a lease; LedgerError LEASE_LOST (409) when it no longer holds the item. */
  async renewLease(
    operationRef: string,
    leaseId: string,
    leaseMs?: number,
    options: RequestOptions = {},
  ): Promise<{ lease: { id: string; holder: string; expires_at: string } }> {
    const body = { lease_id: leaseId, ...(leaseMs === undefined ? {} : { lease_ms: leaseMs }) };
    return (await this.request('POST', `${operationPath(operationRef)}/lease/renew`, options, body)) as {
      lease: { id: string; holder: string; expires_at: string };
    };
  }

  /** Gives a lease back; with holdMs the item stays with no one that long. */
  async releaseLease(
    operationRef: string,
    leaseId: string,
    holdMs?: number,
    options: RequestOptions = {},
  ): Promise<{ released: boolean }> {
    const body = { lease_id: leaseId, ...(holdMs === undefined ? {} : { hold_ms: Math.max(0, Math.round(holdMs)) }) };
    return (await this.request('POST', `${operationPath(operationRef)}/lease/release`, options, body)) as {
      released: boolean;
    };
  }

  async getTrustMetrics(options: TrustQuery = {}): Promise<TrustMetrics> {
    return (await this.request(
      'GET',
      `/v1/metrics/trust${projectionQuery(options, { tool: options.tool })}`,
      options,
    )) as TrustMetrics;
  }

  /** The envelope's JSON Schema, for runtimes that validate in another language. */
  async getEnvelopeSchema(options: RequestOptions = {}): Promise<Record<string, unknown>> {
    return (await this.request('GET', '/v1/schema/envelope', options)) as Record<string, unknown>;
  }

  // ---- transport -------------------------------------------------------------------------------------

  private submitOne(
    operationRef: string,
    event: SubmittedEventInput,
    options: SingleFactOptions,
  ): Promise<SubmitAnswer> {
    const { eventId, ...rest } = options;
    return this.submit(
      operationRef,
      [{ ...event, ...(eventId === undefined ? {} : { event_id: eventId }) } as SubmittedEventInput],
      rest,
    );
  }

  private withEventId(event: SubmittedEventInput): SubmittedEvent {
    const eventId = event.event_id ?? this.eventIds();
    if (!UUID_PATTERN.test(eventId)) {
      throw new LedgerInvalidRequest({
        code: 'BAD_REQUEST',
        status: 400,
        detail: `event_id must be a UUID, got "${eventId.slice(0, 40)}"`,
        field: 'events[].event_id',
      });
    }
    return { ...event, event_id: eventId } as SubmittedEvent;
  }

  private headers(options: RequestOptions, hasBody: boolean): Record<string, string> {
    const read = (value: string | (() => string | undefined) | undefined) =>
      typeof value === 'function' ? value() : value;
    const traceparent = options.traceparent ?? read(this.options.traceparent);
    const tracestate = options.tracestate ?? read(this.options.tracestate);
    return {
      accept: 'application/json, application/problem+json',
      ...(hasBody ? { 'content-type': 'application/json' } : {}),
      ...(this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {}),
      ...(traceparent ? { traceparent } : {}),
      ...(tracestate ? { tracestate } : {}),
      ...(options.lease ? { 'ledger-lease': options.lease } : {}),
      // An sf-string (RFC 8941), as the draft defines the field.
      ...(options.idempotencyKey
        ? { 'idempotency-key': `"${options.idempotencyKey.replace(/(["\\])/g, '\\$1')}"` }
        : {}),
    };
  }

  /** Backoff with "equal jitter": half fixed, half random, so retrying workers spread out. */
  private backoffMs(retry: number): number {
    const ceiling = Math.min(this.maxRetryDelayMs, this.retryBaseDelayMs * 2 ** retry);
    return ceiling / 2 + Math.random() * (ceiling / 2);
  }

  /**
   * One request with bounded retries. The serialized body is fixed once, so a resend is
   * byte-for-byte the first send. Retried: no answer (connection failures, timeouts) and
   * 429 / 502 / 503 / 504; a Retry-After is honoured up to `maxRetryDelayMs`. Not retried: any
   * other answer, which is the ledger's decision (a refusal stays a refusal).
   */
  private async request(
    method: 'GET' | 'POST',
    path: string,
    options: RequestOptions,
    body?: unknown,
  ): Promise<unknown> {
    const url = `${this.baseUrl}${path}`;
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers = this.headers(options, payload !== undefined);
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    let lastError: LedgerError | undefined;
    for (let retry = 0; retry <= this.maxRetries; retry++) {
      if (retry > 0) {
        const advised = lastError?.retryAfterSeconds;
        const wait = advised === undefined ? this.backoffMs(retry - 1) : advised * 1000;
        if (wait > this.maxRetryDelayMs) throw lastError;
        await this.sleep(wait);
      }
      options.signal?.throwIfAborted();
      let answer: Answer;
      try {
        answer = await this.send(url, method, headers, payload, timeoutMs, options.signal);
      } catch (error) {
        if (options.signal?.aborted) throw error;
        lastError = error as LedgerError;
        continue;
      }
      if (answer.status >= 200 && answer.status < 300) {
        if (answer.body === undefined) {
          throw new LedgerError({
            code: 'LEDGER_BAD_RESPONSE',
            status: answer.status,
            detail: 'the answer is not JSON',
          });
        }
        return answer.body;
      }
      const advisedMs = retryAfterMs(headerValue(answer.headers, 'retry-after'), new Date());
      const error = ledgerErrorFromAnswer(
        answer.status,
        answer.body,
        advisedMs === undefined ? undefined : Math.ceil(advisedMs / 1000),
      );
      if (!RETRYABLE_STATUSES.has(answer.status)) throw error;
      lastError = error;
    }
    throw lastError;
  }

  /** One try, under its own timeout; transport failures come back as LedgerUnavailable. */
  private async send(
    url: string,
    method: string,
    headers: Record<string, string>,
    payload: string | undefined,
    timeoutMs: number,
    callerSignal: AbortSignal | undefined,
  ): Promise<Answer> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error('timeout')), timeoutMs);
    const onCallerAbort = () => controller.abort(callerSignal?.reason);
    callerSignal?.addEventListener('abort', onCallerAbort, { once: true });
    try {
      const response = await this.fetchImpl(url, { method, headers, body: payload, signal: controller.signal });
      // The body is read under the same timeout: an answer that never finishes is no answer.
      const text = await response.text();
      let parsed: unknown;
      try {
        parsed = text === '' ? undefined : JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      return { status: response.status, headers: response.headers, body: parsed };
    } catch (error) {
      if (callerSignal?.aborted) throw error;
      const timedOut = controller.signal.aborted;
      throw new LedgerUnavailable({
        code: timedOut ? 'LEDGER_TIMEOUT' : 'LEDGER_UNREACHABLE',
        status: 0,
        detail: timedOut ? `no answer from the ledger within ${timeoutMs} ms` : 'the ledger could not be reached',
        cause: error,
      });
    } finally {
      clearTimeout(timer);
      callerSignal?.removeEventListener('abort', onCallerAbort);
    }
  }
}
