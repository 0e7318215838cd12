import {
  NEXT_ACTIONS,
  type NextAction,
  type ToolEnvelope,
  type ToolError,
  validateEnvelope,
} from '@recovery-ledger/core';
import {
  agentMessage,
  NORMALIZED_CODE_FACTS,
  userMessage,
  type NormalizedCode,
} from '../../../../packages/client/src/normalizers/envelope-builders';

export const NOW = new Date('2030-03-04T05:06:07.000Z');
export const REF = 'run_81/step_4';

/** Every sentence a normalizer may put in agent_message: nothing else is allowed through. */
export const FIXED_AGENT_MESSAGES: ReadonlySet<string> = new Set(
  (Object.keys(NORMALIZED_CODE_FACTS) as NormalizedCode[]).flatMap((code) =>
    NEXT_ACTIONS.map((action: NextAction) => agentMessage(code, action)),
  ),
);
export const FIXED_USER_MESSAGES: ReadonlySet<string> = new Set(NEXT_ACTIONS.map((action) => userMessage(action)));

/** The envelope passes the ledger's own validation unchanged (the ledger would store it). */
export function expectValid(envelope: ToolEnvelope, sideEffect: 'read' | 'write', operationRef = REF): void {
  const checked = validateEnvelope(envelope, { operationRef, sideEffect });
  if (!checked.ok) throw new Error(`invalid envelope: ${checked.field} ${checked.reason}\n${JSON.stringify(envelope)}`);
}

export function expectError(envelope: ToolEnvelope): ToolError {
  if (envelope.ok) throw new Error(`expected a failure envelope, got a success: ${JSON.stringify(envelope)}`);
  return envelope;
}

/** The four questions of docs/contract.md §2, in one line per case. */
export function shape(envelope: ToolEnvelope) {
  if (envelope.ok) return { ok: true };
  return {
    ok: false,
    code: envelope.code,
    category: envelope.category,
    commit_state: envelope.commit_state,
    directive: envelope.retry.directive,
    next_action: envelope.next_action,
  };
}
