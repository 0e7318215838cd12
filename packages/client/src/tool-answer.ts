/**
 * What a model receives from a ledgered tool call, whatever framework runs it: an envelope built
 * from the ledger's decision (never from an upstream's prose), and a short text saying the same.
 * Codes are the ledger's and the normalizers' own, or an upstream code the caller vouches for;
 * the sentences are fixed per code and next action (docs/contract.md §4, docs/integrations.md).
 */
import type { Directive, OperationState } from './ledger-api.types';
import { NORMALIZED_CODE_FACTS } from './normalizers/envelope-builders';
import {
  DEFAULT_ENVELOPE_LIMITS,
  type ErrorCategory,
  type NextAction,
  type ToolEnvelope,
  type ToolError,
  validateEnvelope,
} from '@recovery-ledger/core/envelope';

/** Facts stated in the loop's own words: ledger refusals, transitions, and its own codes. */
const GATEWAY_CODE_FACTS: Record<string, string> = {
  VERIFY_BEFORE_RETRY: 'The outcome of the last attempt is unknown and not yet verified.',
  ATTEMPT_IN_FLIGHT: 'An attempt for this operation_ref is still in flight.',
  UNCHANGED_RETRY: 'This same input was already rejected; nothing was sent.',
  RETRY_NOT_BEFORE: 'It is too early for a new attempt; nothing was sent.',
  APPROVAL_REQUIRED: 'The operation waits for a person to approve it; nothing was sent.',
  ATTEMPTS_EXHAUSTED: 'The attempts allowed for this operation are used up.',
  STEP_ESCALATED: 'The operation was escalated to a person.',
  STEP_CANCELLED: 'A person cancelled this operation; nothing was sent, and nothing will be.',
  OPERATION_REF_REUSED:
    'This operation_ref already belongs to a different operation (another tool or input); nothing was sent.',
  VERIFICATION_PREMATURE: 'Nothing was found yet, and the consistency window has not ended.',
  LOOKUP_UNAVAILABLE:
    'The outcome could not be verified because the lookup was unavailable; the operation is escalated to a person.',
  APPROVAL_DENIED: 'The approval was denied; nothing was sent.',
  DEPENDENCY_FAILURES_EXHAUSTED: 'The provider failed too many times in a row.',
  VERIFIED_NOT_COMMITTED: 'Verified: the write did not happen.',
  APPROVAL_GRANTED: 'The approval was granted.',
  POLICY_REQUIRES_APPROVAL: 'A person must approve this operation before the tool runs; nothing was sent.',
  LEDGER_UNAVAILABLE: 'The ledger could not be reached; nothing was sent.',
  LEDGER_UNAUTHORIZED: "The ledger refused the runtime's key; nothing was sent.",
  OUTCOME_NOT_RECORDED: 'The tool ran but its outcome could not be recorded yet.',
  STEP_STATE_UNEXPECTED: 'The operation is in a state this tool cannot act on.',
};

const NEXT_ACTION_SENTENCES: Record<NextAction, string> = {
  correct_input: 'Call the tool again with corrected input and the same operation_ref; an unchanged retry is refused.',
  wait_and_retry: 'Call the tool again with the same operation_ref, not before not_before.',
  verify_operation: 'Send no new write: call verify_operation with this operation_ref (after not_before, when given).',
  request_approval: 'Ask a person to approve it; do not call the tool again until it is approved.',
  escalate: 'Stop and tell the user; do not retry.',
};

/**
 * The same, for a tool whose arguments hold no operation_ref (the agent-framework integrations): the
 * integration keeps the step, so the model's next call of the tool continues it (docs/integrations.md,
 * "The operation_ref rule"), and the integration verifies an unknown outcome itself.
 */
const STEP_TOOL_SENTENCES: Record<NextAction, string> = {
  correct_input:
    'Call the tool again with corrected input: that call continues this same operation; an unchanged retry is refused.',
  wait_and_retry: 'Call the tool again, not before not_before: that call continues this same operation.',
  verify_operation:
    'Send no new write: the outcome is checked before anything is sent again. Calling the tool again (after not_before, when given) continues this same operation and answers its outcome.',
  request_approval: 'Ask a person to approve it; do not call the tool again until it is approved.',
  escalate: 'Stop and tell the user; do not retry.',
};

const USER_MESSAGES: Record<NextAction, string> = {
  correct_input: 'I need corrected details before I can do this.',
  wait_and_retry: 'The request is waiting and will be retried shortly.',
  verify_operation: 'The request is being checked before anything is sent again.',
  request_approval: 'This needs approval before it can continue.',
  escalate: 'This needs attention from a person before it can continue.',
};

/** Codes that may be shown as they are, whatever recorded them. */
const KNOWN_CODES = new Set([...Object.keys(GATEWAY_CODE_FACTS), ...Object.keys(NORMALIZED_CODE_FACTS)]);

export function codeFact(code: string): string {
  return (
    GATEWAY_CODE_FACTS[code] ??
    (NORMALIZED_CODE_FACTS as Record<string, string>)[code] ??
    NORMALIZED_CODE_FACTS.TOOL_FAILURE_REPORTED
  );
}

export interface AnswerContext {
  /** Upstream codes the configuration vouches for (any other is not shown). */
  vouched: readonly string[];
  now: Date;
  /** The refusal code, when the ledger refused what this call asked. */
  refusal?: string;
  /** The envelope recorded for this call's attempt (already normalized). */
  recorded?: ToolEnvelope;
  /** A directive that overrides the state's (a premature verification's not_before). */
  directive?: Directive;
}

/** The status an envelope's next_action leads to, when the ledger does not escalate it. */
const NATURAL_STATUS: Record<NextAction, string> = {
  correct_input: 'needs_input',
  wait_and_retry: 'retry_scheduled',
  verify_operation: 'verifying',
  request_approval: 'awaiting_approval',
  escalate: 'escalated',
};

function showable(code: string | undefined, context: AnswerContext): string | undefined {
  if (!code) return undefined;
  return KNOWN_CODES.has(code) || context.vouched.includes(code) ? code : undefined;
}

function error(
  ref: string,
  code: string,
  fields: {
    category: ErrorCategory;
    commit: 'not_committed' | 'unknown';
    action: NextAction;
    notBefore?: string;
    attempts: number;
    details?: Record<string, string | number | boolean>;
  },
): ToolError {
  const directive =
    fields.action === 'wait_and_retry'
      ? 'after_delay'
      : fields.action === 'correct_input'
        ? 'after_input_fix'
        : 'never';
  return {
    ok: false,
    code,
    category: fields.category,
    commit_state: fields.commit,
    retry: {
      directive,
      ...(fields.notBefore ? { not_before: fields.notBefore } : {}),
      max_attempts_remaining:
        fields.action === 'verify_operation' || directive === 'never' ? 0 : Math.max(0, fields.attempts),
    },
    next_action: fields.action,
    operation_ref: ref,
    safe_details: fields.details ?? {},
    agent_message: `${codeFact(code)} ${NEXT_ACTION_SENTENCES[fields.action]}`,
    user_message: USER_MESSAGES[fields.action],
  };
}

/** The success the ledger holds for a succeeded step (recorded by the tool, or proven by a lookup). */
export function successEnvelope(ref: string, success: unknown, now: Date): ToolEnvelope {
  const record = (success ?? {}) as { checked_at?: string; evidence_ref?: string; result?: unknown };
  return {
    ok: true,
    operation_ref: ref,
    commit_state: 'committed',
    result: record.result ?? null,
    verification: {
      checked_at: typeof record.checked_at === 'string' ? record.checked_at : now.toISOString(),
      ...(typeof record.evidence_ref === 'string' ? { evidence_ref: record.evidence_ref } : {}),
    },
  };
}

/**
 * The envelope for where the ledger left the step. The envelope this call recorded is answered as
 * it is when the ledger followed it; otherwise the state speaks (a refusal, a bound reached, a
 * verification's outcome).
 */
export function envelopeForState(state: OperationState, context: AnswerContext): ToolEnvelope {
  const ref = state.operation_ref;
  const recorded = context.recorded;
  if (state.status === 'succeeded') {
    if (recorded?.ok && !context.refusal) return recorded;
    return successEnvelope(ref, state.success, context.now);
  }
  if (recorded && !recorded.ok && !context.refusal && NATURAL_STATUS[recorded.next_action] === state.status) {
    // The tool's machine fields as recorded; the sentences are the loop's own, never the upstream's.
    return {
      ...recorded,
      agent_message: `${codeFact(recorded.code)} ${NEXT_ACTION_SENTENCES[recorded.next_action]}`,
      user_message: USER_MESSAGES[recorded.next_action],
    };
  }

  const last = state.last_envelope as { code?: string; category?: ErrorCategory } | undefined;
  const code = showable(context.refusal, context) ?? showable(state.reason, context) ?? showable(last?.code, context);
  const attempts = context.directive?.attempts_remaining ?? state.attempts_remaining;
  const notBefore = context.directive?.not_before ?? state.not_before;
  const verifyDetails = { verification_tool: 'verify_operation' };
  switch (state.status) {
    case 'dispatched':
    case 'verifying':
      return error(ref, code ?? 'OUTCOME_UNKNOWN', {
        category: 'dependency',
        commit: 'unknown',
        action: 'verify_operation',
        notBefore,
        attempts,
        details: verifyDetails,
      });
    case 'needs_input':
      return error(ref, code ?? 'UNCHANGED_RETRY', {
        category: 'validation',
        commit: 'not_committed',
        action: 'correct_input',
        attempts,
      });
    case 'retry_scheduled':
      return error(ref, code ?? 'RETRY_NOT_BEFORE', {
        category: last?.category ?? 'dependency',
        commit: 'not_committed',
        action: 'wait_and_retry',
        notBefore: notBefore ?? context.now.toISOString(),
        attempts,
      });
    case 'awaiting_approval':
      return error(ref, code ?? 'APPROVAL_REQUIRED', {
        category: 'authorization',
        commit: 'not_committed',
        action: 'request_approval',
        attempts,
      });
    case 'planned':
    case 'retry_ready':
      // A new attempt may run now: the envelope's word for that is a wait that is already over.
      return error(ref, state.reason === 'APPROVAL_GRANTED' ? 'APPROVAL_GRANTED' : 'VERIFIED_NOT_COMMITTED', {
        category: 'dependency',
        commit: 'not_committed',
        action: 'wait_and_retry',
        notBefore: context.now.toISOString(),
        attempts,
      });
    case 'escalated':
      if (state.reason === 'LOOKUP_UNAVAILABLE') {
        // The write may have happened: say so (unknown), and only a person's check may follow.
        return error(ref, 'LOOKUP_UNAVAILABLE', {
          category: 'dependency',
          commit: 'unknown',
          action: 'verify_operation',
          attempts: 0,
          details: verifyDetails,
        });
      }
      return error(ref, code ?? 'STEP_ESCALATED', {
        category: last?.category ?? 'dependency',
        commit: 'not_committed',
        action: 'escalate',
        attempts: 0,
      });
    case 'cancelled':
      // A person ended it (docs/contract.md §4.10): the model may only hand it back to a person.
      return error(ref, 'STEP_CANCELLED', {
        category: 'conflict',
        commit: 'not_committed',
        action: 'escalate',
        attempts: 0,
      });
    default:
      return error(ref, 'STEP_STATE_UNEXPECTED', {
        category: 'internal',
        commit: 'not_committed',
        action: 'escalate',
        attempts: 0,
      });
  }
}

/** A refusal that is about this call's input, not the step: another operation owns the ref. */
export function refReusedEnvelope(ref: string): ToolError {
  return error(ref, 'OPERATION_REF_REUSED', {
    category: 'conflict',
    commit: 'not_committed',
    action: 'correct_input',
    attempts: 1,
    details: { field: 'operation_ref' },
  });
}

export function ledgerUnavailableEnvelope(ref: string, now: Date, retryAfterSeconds: number | undefined): ToolError {
  return error(ref, 'LEDGER_UNAVAILABLE', {
    category: 'dependency',
    commit: 'not_committed',
    action: 'wait_and_retry',
    notBefore: new Date(now.getTime() + (retryAfterSeconds ?? 5) * 1000).toISOString(),
    attempts: 1,
  });
}

/** The runtime's own key is wrong or lacks the role: waiting does not fix it, an operator does. */
export function ledgerUnauthorizedEnvelope(ref: string): ToolError {
  return error(ref, 'LEDGER_UNAUTHORIZED', {
    category: 'authorization',
    commit: 'not_committed',
    action: 'escalate',
    attempts: 0,
  });
}

export function notRecordedEnvelope(ref: string): ToolError {
  return error(ref, 'OUTCOME_NOT_RECORDED', {
    category: 'dependency',
    commit: 'unknown',
    action: 'verify_operation',
    attempts: 0,
    details: { verification_tool: 'verify_operation' },
  });
}

export function approvalGateEnvelope(ref: string): ToolError {
  return error(ref, 'POLICY_REQUIRES_APPROVAL', {
    category: 'authorization',
    commit: 'not_committed',
    action: 'request_approval',
    attempts: 0,
  });
}

/**
 * An answer that breaks the envelope rules is not sent: a write's outcome is then stated as
 * unknown, which is never wrong, only cautious.
 */
export function checked(envelope: ToolEnvelope): ToolEnvelope {
  const result = validateEnvelope(
    envelope,
    { operationRef: envelope.operation_ref, sideEffect: 'write' },
    DEFAULT_ENVELOPE_LIMITS,
  );
  return result.ok ? result.envelope : notRecordedEnvelope(envelope.operation_ref);
}

/** OPERATION_REF_REUSED as a step tool's caller meets it: the name was the application's. */
const STEP_REF_TAKEN =
  'The operation_ref the application named for this call already belongs to another operation; nothing was sent.';

/**
 * An answer for a tool whose arguments hold no operation_ref: the same envelope, its agent_message
 * saying what such a tool's caller can do (STEP_TOOL_SENTENCES). A ref that belongs to another
 * operation is the application's naming (its `key` or `operationRef`), not the input: no call the
 * model can make changes it, so that answer goes to a person (escalate).
 */
export function forStepTool(envelope: ToolEnvelope): ToolEnvelope {
  if (envelope.ok) return envelope;
  if (envelope.code === 'OPERATION_REF_REUSED') {
    const escalated = error(envelope.operation_ref, envelope.code, {
      category: 'conflict',
      commit: 'not_committed',
      action: 'escalate',
      attempts: 0,
    });
    return { ...escalated, agent_message: `${STEP_REF_TAKEN} ${STEP_TOOL_SENTENCES.escalate}` };
  }
  return { ...envelope, agent_message: `${codeFact(envelope.code)} ${STEP_TOOL_SENTENCES[envelope.next_action]}` };
}

export interface ModelTextOptions {
  /** The tool's arguments hold no operation_ref (the framework integrations): see forStepTool. */
  stepTool?: boolean;
}

/**
 * The text a model reads: one line it can act on, then the envelope's stable fields as JSON
 * (code, next_action, commit_state, retry, operation_ref, agent_message; on success the result
 * and its evidence). Nothing an upstream wrote in prose reaches it: the envelope holds none.
 */
export function modelText(tool: string, envelope: ToolEnvelope, options: ModelTextOptions = {}): string {
  if (envelope.ok) {
    const evidence = envelope.verification.evidence_ref;
    const stable = {
      ok: true,
      operation_ref: envelope.operation_ref,
      commit_state: envelope.commit_state,
      result: envelope.result,
      ...(evidence ? { evidence_ref: evidence } : {}),
    };
    return `${tool} succeeded for operation_ref ${envelope.operation_ref}${evidence ? ` (evidence ${evidence})` : ''}.\n${JSON.stringify(stable)}`;
  }
  return failureText(tool, options.stepTool ? (forStepTool(envelope) as ToolError) : envelope, options.stepTool);
}

/**
 * A failure as the model reads it: the stable fields, and for a step tool the field to correct,
 * when the envelope names one (a step tool's caller has no operation_ref to send back).
 */
function failureText(tool: string, envelope: ToolError, namesField = false): string {
  const field = namesField ? envelope.safe_details?.field : undefined;
  const stable = {
    ok: false,
    code: envelope.code,
    category: envelope.category,
    commit_state: envelope.commit_state,
    next_action: envelope.next_action,
    retry: envelope.retry,
    operation_ref: envelope.operation_ref,
    ...(field === undefined ? {} : { field }),
    agent_message: envelope.agent_message,
  };
  const notBefore = envelope.retry.not_before ? ` not_before=${envelope.retry.not_before}` : '';
  const named = field === undefined ? '' : ` field=${String(field)}`;
  return `${tool} did not complete: ${envelope.code}.${named} ${envelope.agent_message} next_action=${envelope.next_action}${notBefore} operation_ref=${envelope.operation_ref}\n${JSON.stringify(stable)}`;
}
