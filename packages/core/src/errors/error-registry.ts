/**
 * Every stable code the HTTP API answers with, defined once: its status and what it means. The
 * README's table is checked against this registry both ways (test/unit/error-registry.unit.spec.ts).
 */
export interface ErrorDefinition {
  status: number;
  title: string;
  /**
   * The answer always carries Retry-After (and `retry_after_seconds`): the delay its cause gave, or
   * a default when it gave none (src/http/problem-body.ts, retryAfterOf).
   */
  retryAfter?: boolean;
}

export const ERROR_REGISTRY = {
  ATTEMPT_IN_FLIGHT: { status: 409, title: 'Dispatch while an attempt has no recorded outcome' },
  VERIFY_BEFORE_RETRY: { status: 409, title: 'Dispatch while the outcome is unknown and unverified' },
  UNCHANGED_RETRY: { status: 409, title: 'Dispatch with the same input hash after correct_input' },
  RETRY_NOT_BEFORE: { status: 409, title: 'Dispatch before not_before', retryAfter: true },
  APPROVAL_REQUIRED: { status: 409, title: 'Dispatch while approval is pending' },
  ATTEMPTS_EXHAUSTED: { status: 409, title: 'Dispatch past the bound (the step is escalated)' },
  STEP_ESCALATED: { status: 409, title: 'Dispatch on an escalated step' },
  VERIFICATION_PREMATURE: { status: 409, title: 'not_found inside the consistency window', retryAfter: true },
  OPERATION_REF_REUSED: { status: 409, title: 'StepPlanned again with a different definition' },
  REVISION_CONFLICT: { status: 409, title: 'expected_revision is not the stream revision' },
  STEP_NOT_PLANNED: { status: 409, title: 'A fact before StepPlanned' },
  ATTEMPT_MISMATCH: {
    status: 409,
    title: 'An envelope or dispatch for an attempt that is not the one in flight or next',
  },
  FACT_NOT_EXPECTED: { status: 409, title: 'A verification or approval the step is not waiting for' },
  EVENT_ID_REUSED: { status: 409, title: 'An event_id already used for a different fact' },
  STREAM_FULL: { status: 409, title: "An append past the bound of events one operation's stream may hold" },
  LEASE_LOST: { status: 409, title: 'A lease renewal for a lease that no longer holds its work item' },
  STEP_CANCELLED: { status: 409, title: 'A dispatch or operator action on a cancelled step' },
  STEP_SUCCEEDED: { status: 409, title: 'An operator action on a succeeded step' },
  STEP_NOT_ESCALATED: { status: 409, title: 'A reopen or acknowledgement of a step that is not escalated' },
  OUTCOME_UNVERIFIED: { status: 409, title: "A reopen or cancel while an attempt's outcome is unknown and unverified" },
  ESCALATION_ALREADY_ACKNOWLEDGED: {
    status: 409,
    title: 'An acknowledgement naming another assignee than the one who has the escalation, without reassign',
  },
  OUTCOME_KNOWN: { status: 409, title: "A manual verification where no attempt's outcome is unknown" },
  IDEMPOTENCY_KEY_IN_FLIGHT: { status: 409, title: 'A request with this Idempotency-Key is still being processed' },
  ENVELOPE_INVALID: { status: 422, title: 'An envelope that breaks the envelope rules' },
  SECRET_IN_IDENTIFIER: { status: 422, title: 'An identifier field holds what looks like a credential' },
  IDEMPOTENCY_KEY_REUSED: { status: 422, title: 'An Idempotency-Key already used for another request' },
  BAD_REQUEST: { status: 400, title: 'A body, path or query that is not the documented shape' },
  UNAUTHENTICATED: { status: 401, title: 'No or unknown API key' },
  FORBIDDEN: { status: 403, title: 'The key role or tenant does not allow this' },
  OPERATION_NOT_FOUND: { status: 404, title: 'The operation has no events' },
  RUN_NOT_FOUND: { status: 404, title: 'The run has no planned steps' },
  WEBHOOK_NOT_FOUND: { status: 404, title: 'No active webhook subscription of this tenant has this id' },
  WEBHOOK_DELIVERY_NOT_FOUND: { status: 404, title: 'No webhook delivery of this tenant has this id' },
  WEBHOOK_SUBSCRIPTION_INACTIVE: { status: 409, title: 'The webhook subscription was ended or disabled' },
  WEBHOOK_SUBSCRIPTION_LIMIT: { status: 409, title: 'The tenant has the most active webhook subscriptions allowed' },
  NOT_FOUND: { status: 404, title: 'No such route' },
  METHOD_NOT_ALLOWED: { status: 405, title: 'The route does not take this method' },
  MISDIRECTED_REQUEST: { status: 421, title: 'In local mode, a Host that is not a loopback name or address' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'The request body is over the configured limit' },
  TOO_MANY_OPERATIONS: { status: 413, title: 'More operations in one request than it may name' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'The request body is not application/json' },
  RATE_LIMITED: { status: 429, title: 'Too many requests for this key', retryAfter: true },
  STORE_UNAVAILABLE: { status: 503, title: 'The event store cannot be reached or written now', retryAfter: true },
  PROJECTION_LAGGING: {
    status: 503,
    title: 'The projection did not reach the asked position in time',
    retryAfter: true,
  },
  CLOCK_SKEW_UNBOUNDED: {
    status: 503,
    title:
      'The clocks of the instances sharing the store differ beyond the bound, or are not compared yet: no decision that needs a window to have closed',
    retryAfter: true,
  },
  HISTORY_INTEGRITY_FAILED: { status: 500, title: 'The stored history failed verification; nothing was stored' },
  HISTORY_ROLLED_BACK: {
    status: 503,
    title: 'The log is behind what the ledger recorded before (restored from an older copy); no write is decided',
  },
  INTERNAL_ERROR: { status: 500, title: 'An unexpected error; nothing was stored' },
} as const satisfies Record<string, ErrorDefinition>;

export type ErrorCode = keyof typeof ERROR_REGISTRY;

/** A code's definition with every field of the type readable, whichever code it is. */
export function errorDefinition(code: ErrorCode): ErrorDefinition {
  return ERROR_REGISTRY[code];
}

export function isErrorCode(code: string): code is ErrorCode {
  return Object.prototype.hasOwnProperty.call(ERROR_REGISTRY, code);
}
