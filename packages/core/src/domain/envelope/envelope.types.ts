/**
 * The tool result envelope, exactly the contract's shapes (docs/contract.md §2). The vocabularies are `as const`
 * arrays so that the types, the edge validation and the published JSON Schema share one source.
 */
export const COMMIT_STATES = ['not_committed', 'committed', 'unknown'] as const;
export const RETRY_DIRECTIVES = ['never', 'after_delay', 'after_input_fix'] as const;
export const NEXT_ACTIONS = [
  'correct_input',
  'wait_and_retry',
  'verify_operation',
  'request_approval',
  'escalate',
] as const;
export const ERROR_CATEGORIES = ['validation', 'authorization', 'conflict', 'dependency', 'internal'] as const;

export type CommitState = (typeof COMMIT_STATES)[number];
export type RetryDirective = (typeof RETRY_DIRECTIVES)[number];
export type NextAction = (typeof NEXT_ACTIONS)[number];
export type ErrorCategory = (typeof ERROR_CATEGORIES)[number];

export type SafeDetailValue = string | number | boolean;

export interface RetryAdvice {
  directive: RetryDirective;
  /** An absolute ISO-8601 instant, never a vague duration. */
  not_before?: string;
  max_attempts_remaining: number;
}

export interface ToolError {
  ok: false;
  code: string;
  category: ErrorCategory;
  commit_state: CommitState;
  retry: RetryAdvice;
  next_action: NextAction;
  operation_ref: string;
  safe_details: Record<string, SafeDetailValue>;
  agent_message: string;
  user_message: string;
}

export interface ToolSuccess<T = unknown> {
  ok: true;
  operation_ref: string;
  commit_state: 'committed';
  result: T;
  verification: { checked_at: string; evidence_ref?: string };
}

export type ToolEnvelope<T = unknown> = ToolError | ToolSuccess<T>;

/**
 * The smaller form a read-only tool may return (docs/contract.md §2): a stable code and a retry direction.
 * Validation fills the rest with what a read implies (nothing committed, nothing to verify).
 */
export interface ReadToolError {
  ok: false;
  code: string;
  retry: Partial<RetryAdvice> & { directive: RetryDirective };
  category?: ErrorCategory;
  commit_state?: CommitState;
  next_action?: NextAction;
  operation_ref?: string;
  safe_details?: Record<string, SafeDetailValue>;
  agent_message?: string;
  user_message?: string;
}

export const DEFAULT_SAFE_DETAIL_KEYS = [
  'field',
  'allowed_values',
  'retry_after',
  'resource_version',
  'verification_tool',
  'limit',
] as const;

export interface EnvelopeLimits {
  /** Keys allowed in `safe_details`; anything else is refused, never silently dropped. */
  safeDetailKeys: readonly string[];
  maxSafeDetails: number;
  maxSafeDetailValueLength: number;
  maxMessageLength: number;
  maxCodeLength: number;
  maxOperationRefLength: number;
}

export const DEFAULT_ENVELOPE_LIMITS: EnvelopeLimits = {
  safeDetailKeys: DEFAULT_SAFE_DETAIL_KEYS,
  maxSafeDetails: 16,
  maxSafeDetailValueLength: 256,
  maxMessageLength: 500,
  maxCodeLength: 64,
  maxOperationRefLength: 200,
};
