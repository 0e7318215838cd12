/**
 * What the host's model receives: the client's neutral answer (an envelope built from the ledger's
 * decision, never from an upstream's prose; see @recovery-ledger/client's tool-answer), as an MCP
 * tool result.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { type ToolEnvelope } from '@recovery-ledger/client';

export {
  approvalGateEnvelope,
  checked,
  codeFact,
  envelopeForState,
  ledgerUnauthorizedEnvelope,
  ledgerUnavailableEnvelope,
  notRecordedEnvelope,
  refReusedEnvelope,
  successEnvelope,
  type AnswerContext,
} from '@recovery-ledger/client';

/** One line a text-only host can act on, then the envelope itself as JSON. */
export function hostAnswer(tool: string, envelope: ToolEnvelope): CallToolResult {
  const summary = envelope.ok
    ? `${tool} succeeded for operation_ref ${envelope.operation_ref}${envelope.verification.evidence_ref ? ` (evidence ${envelope.verification.evidence_ref})` : ''}.`
    : `${tool} did not complete: ${envelope.code}. ${envelope.agent_message} next_action=${envelope.next_action}${envelope.retry.not_before ? ` not_before=${envelope.retry.not_before}` : ''} operation_ref=${envelope.operation_ref}`;
  return {
    content: [{ type: 'text', text: `${summary}\n${JSON.stringify(envelope)}` }],
    structuredContent: envelope as unknown as Record<string, unknown>,
    isError: !envelope.ok,
  };
}

/** A call the gateway cannot even place (no operation_ref): its own words only. */
export function callError(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}
