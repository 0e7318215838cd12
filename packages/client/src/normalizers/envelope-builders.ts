import type {
  CommitState,
  ErrorCategory,
  NextAction,
  RetryDirective,
  SafeDetailValue,
  ToolError,
} from '@recovery-ledger/core/envelope';

export type SideEffect = 'read' | 'write';

/**
 * What every normalizer needs to know besides the thing it normalizes. `now` is injected so the
 * functions stay pure: the same input always gives the same envelope.
 */
export interface NormalizeContext {
  /** The durable operation reference, chosen before the first write (the contract's idempotency key). */
  operationRef: string;
  sideEffect: SideEffect;
  now: Date;
  /** Attempts a retryable failure may still make; the ledger applies the lower of this and the policy. */
  maxAttemptsRemaining?: number;
  /** The wait when a retryable failure gives no Retry-After. */
  defaultRetryDelayMs?: number;
  /** The longest wait a retry may be scheduled after; beyond it the failure goes to a person. */
  maxRetryDelayMs?: number;
  /** Named in `safe_details` of an unknown outcome, so the runtime knows which lookup proves it. */
  verificationTool?: string;
}

export const DEFAULT_RETRY_DELAY_MS = 1000;
/** A day: a provider asking for a longer wait is not asking for an automatic retry. */
export const DEFAULT_MAX_RETRY_DELAY_MS = 24 * 60 * 60 * 1000;
/** docs/contract.md §2: after correct_input, "one new, validated request with the same operation reference". */
export const DEFAULT_INPUT_FIX_ATTEMPTS = 1;
export const DEFAULT_RETRY_ATTEMPTS = 3;
/** After a call window passed unused: the next attempt is not held back for long, nothing was sent. */
export const CALL_WINDOW_RETRY_DELAY_MS = 1000;

/**
 * The stable codes the normalizers produce, each with a fixed, factual sentence. Upstream text is
 * untrusted input (seed: an integration error is still untrusted input), so no provider wording
 * ever reaches `agent_message` or `user_message`: only these sentences do.
 */
export const NORMALIZED_CODE_FACTS = {
  INVALID_INPUT: 'The provider rejected the input; nothing was changed.',
  RESOURCE_NOT_FOUND: 'The provider did not find a resource the input refers to; nothing was changed.',
  PAYLOAD_TOO_LARGE: 'The provider refused the request as too large; nothing was changed.',
  UPSTREAM_UNAUTHENTICATED: 'The provider did not accept the credentials; nothing was changed.',
  MISSING_APPROVAL: 'The provider refused the action as not permitted; nothing was changed.',
  CONFLICT: 'The provider refused the action in the current state of the resource; nothing was changed.',
  VERSION_CONFLICT: 'The resource changed since it was read; nothing was changed.',
  UPSTREAM_REJECTED: 'The provider rejected the request; nothing was changed.',
  RATE_LIMITED: 'The provider is rate limiting requests; nothing was changed.',
  DEPENDENCY_UNAVAILABLE: 'The provider is unavailable.',
  NETWORK_UNREACHABLE: 'The provider could not be reached; the request never left.',
  TLS_FAILURE: 'The connection to the provider failed its TLS checks; the request never left.',
  REQUEST_NOT_SENT: 'The request was cancelled before it was sent.',
  REQUEST_INTERRUPTED: 'The request was interrupted before an answer came back.',
  OUTCOME_UNKNOWN: 'The write may have completed.',
  ACCEPTED_NOT_CONFIRMED: 'The provider accepted the request but has not confirmed it.',
  UPSTREAM_ERROR: 'The tool reported an error; its text was withheld as untrusted.',
  TOOL_FAILURE_REPORTED: 'The tool reported a failure.',
  TOOL_RESULT_INVALID: 'The tool returned a result that is not a valid envelope.',
  UNVERIFIED_RESULT: 'The tool reported success without a structured result.',
  CALL_WINDOW_PASSED: 'The call window the ledger granted had passed before the call; the request was not sent.',
} as const;

export type NormalizedCode = keyof typeof NORMALIZED_CODE_FACTS;

/** What the runtime may do next, in the envelope's vocabulary, as a fixed sentence. */
const NEXT_ACTION_SENTENCES: Record<NextAction, string> = {
  correct_input: 'Correct the input before a new attempt; an unchanged retry is refused.',
  wait_and_retry: 'A new attempt may run after not_before.',
  verify_operation: 'Verify operation_ref before any new write.',
  request_approval: 'Request approval; do not call the tool again until it is granted.',
  escalate: 'Escalate to a person; do not retry automatically.',
};

const USER_MESSAGES: Record<NextAction, string> = {
  correct_input: 'I need corrected details before I can do this.',
  wait_and_retry: 'The request is waiting and will be retried shortly.',
  verify_operation: 'The request is being checked before anything is sent again.',
  request_approval: 'This needs approval before it can continue.',
  escalate: 'This needs attention from a person before it can continue.',
};

export function agentMessage(code: NormalizedCode, nextAction: NextAction): string {
  return `${NORMALIZED_CODE_FACTS[code]} ${NEXT_ACTION_SENTENCES[nextAction]}`;
}

export function userMessage(nextAction: NextAction): string {
  return USER_MESSAGES[nextAction];
}

export function instantAfter(now: Date, delayMs: number): string {
  return new Date(now.getTime() + Math.max(0, delayMs)).toISOString();
}

export interface ToolErrorSpec {
  code: NormalizedCode;
  category: ErrorCategory;
  commitState: CommitState;
  nextAction: NextAction;
  directive: RetryDirective;
  notBefore?: string;
  maxAttemptsRemaining: number;
  safeDetails?: Record<string, SafeDetailValue | undefined>;
}

/** The one place a normalizer's ToolError is assembled, so every output has the same discipline. */
export function toolError(context: NormalizeContext, spec: ToolErrorSpec): ToolError {
  const safe_details: Record<string, SafeDetailValue> = {};
  for (const [key, value] of Object.entries(spec.safeDetails ?? {})) if (value !== undefined) safe_details[key] = value;
  return {
    ok: false,
    code: spec.code,
    category: spec.category,
    commit_state: spec.commitState,
    retry: {
      directive: spec.directive,
      ...(spec.notBefore === undefined ? {} : { not_before: spec.notBefore }),
      max_attempts_remaining: Math.max(0, Math.floor(spec.maxAttemptsRemaining)),
    },
    next_action: spec.nextAction,
    operation_ref: context.operationRef,
    safe_details,
    agent_message: agentMessage(spec.code, spec.nextAction),
    user_message: userMessage(spec.nextAction),
  };
}

/**
 * The contract's most important envelope: the write may have committed, so nothing may run again
 * before a lookup by operation_ref. A read commits nothing, so the same uncertainty on a read is
 * only a failed read: safe to try again later.
 */
export function uncertainOutcome(context: NormalizeContext, code: NormalizedCode = 'OUTCOME_UNKNOWN'): ToolError {
  if (context.sideEffect === 'write') {
    return toolError(context, {
      code,
      category: 'dependency',
      commitState: 'unknown',
      nextAction: 'verify_operation',
      directive: 'never',
      maxAttemptsRemaining: 0,
      safeDetails: { verification_tool: context.verificationTool },
    });
  }
  return waitAndRetry(context, code === 'OUTCOME_UNKNOWN' ? 'REQUEST_INTERRUPTED' : code, undefined);
}

/**
 * Nothing ran; a new attempt may run after an absolute `not_before` (the scheduler owns the wait).
 * A wait beyond `maxRetryDelayMs` is not scheduled: it escalates, rather than retrying sooner
 * than the provider allows or parking the step for years.
 */
export function waitAndRetry(context: NormalizeContext, code: NormalizedCode, delayMs: number | undefined): ToolError {
  const wait = delayMs ?? context.defaultRetryDelayMs ?? DEFAULT_RETRY_DELAY_MS;
  if (wait > (context.maxRetryDelayMs ?? DEFAULT_MAX_RETRY_DELAY_MS)) return escalate(context, code, 'dependency');
  return toolError(context, {
    code,
    category: 'dependency',
    commitState: 'not_committed',
    nextAction: 'wait_and_retry',
    directive: 'after_delay',
    notBefore: instantAfter(context.now, wait),
    maxAttemptsRemaining: context.maxAttemptsRemaining ?? DEFAULT_RETRY_ATTEMPTS,
    safeDetails: delayMs === undefined ? undefined : { retry_after: Math.ceil(delayMs / 1000) },
  });
}

/**
 * The dispatcher found its call window gone before the call started (docs/reliability.md "When an
 * attempt may still reach the provider"): the tool was not called, so nothing committed, and a
 * later attempt may run after a second.
 */
export function callWindowPassed(context: NormalizeContext): ToolError {
  return toolError(context, {
    code: 'CALL_WINDOW_PASSED',
    category: 'internal',
    commitState: 'not_committed',
    nextAction: 'wait_and_retry',
    directive: 'after_delay',
    notBefore: instantAfter(context.now, CALL_WINDOW_RETRY_DELAY_MS),
    maxAttemptsRemaining: context.maxAttemptsRemaining ?? DEFAULT_RETRY_ATTEMPTS,
  });
}

export function correctInput(context: NormalizeContext, code: NormalizedCode, field: string | undefined): ToolError {
  return toolError(context, {
    code,
    category: 'validation',
    commitState: 'not_committed',
    nextAction: 'correct_input',
    directive: 'after_input_fix',
    maxAttemptsRemaining: context.maxAttemptsRemaining ?? DEFAULT_INPUT_FIX_ATTEMPTS,
    safeDetails: { field },
  });
}

export function escalate(
  context: NormalizeContext,
  code: NormalizedCode,
  category: ErrorCategory,
  commitState: Exclude<CommitState, 'committed'> = 'not_committed',
): ToolError {
  // An unknown write must be verified, never just escalated (docs/contract.md §2 consistency rule).
  if (commitState === 'unknown' && context.sideEffect === 'write') return uncertainOutcome(context, code);
  return toolError(context, {
    code,
    category,
    commitState: context.sideEffect === 'read' ? 'not_committed' : commitState,
    nextAction: 'escalate',
    directive: 'never',
    maxAttemptsRemaining: 0,
  });
}

export function requestApproval(context: NormalizeContext, code: NormalizedCode): ToolError {
  return toolError(context, {
    code,
    category: 'authorization',
    commitState: 'not_committed',
    nextAction: 'request_approval',
    directive: 'never',
    maxAttemptsRemaining: 0,
  });
}
