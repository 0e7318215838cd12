import {
  DEFAULT_ENVELOPE_LIMITS,
  type EnvelopeLimits,
  type SafeDetailValue,
  type ToolEnvelope,
  type ToolError,
  validateEnvelope,
} from '@recovery-ledger/core/envelope';
import { agentMessage, escalate, uncertainOutcome, userMessage, type NormalizeContext } from './envelope-builders';
import { redactUpstream, safeToken, upstreamError } from './upstream-text';

export interface McpNormalizeOptions extends NormalizeContext {
  /** The limits the ledger validates with; an envelope that breaks them would be refused there. */
  limits?: EnvelopeLimits;
  /**
   * Codes this tool is vouched for. An envelope with any other code, or any code at all when no
   * list is given, keeps its machine fields but its code becomes UPSTREAM_ERROR: a code is text
   * the tool chose too, and passes on only when someone vouched for it.
   */
  allowedCodes?: readonly string[];
  /**
   * The call's argument names (see inputFieldsOf): a `field` detail is kept only when it names one
   * of them. Without the list no `field` is kept: it is the detail the model is asked to act on.
   */
  inputFields?: readonly string[];
  /**
   * Keep the tool's own `agent_message` / `user_message` (redacted). Off by default: a remote MCP
   * server is upstream, and its prose is replaced by fixed sentences for its next_action.
   */
  trustMessages?: boolean;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** An envelope sits in `structuredContent` itself, or under its `envelope` key. */
function envelopeIn(structured: unknown): Record<string, unknown> | undefined {
  if (!isRecord(structured)) return undefined;
  if (typeof structured.ok === 'boolean') return structured;
  if (isRecord(structured.envelope) && typeof structured.envelope.ok === 'boolean') return structured.envelope;
  return undefined;
}

/** An unreadable result: after a write nothing proves either outcome; after a read a person looks. */
function invalidResult(options: McpNormalizeOptions): ToolError {
  if (options.sideEffect === 'write') return uncertainOutcome(options, 'TOOL_RESULT_INVALID');
  return escalate(options, 'TOOL_RESULT_INVALID', 'internal');
}

/** Only token-shaped details travel on; free text in a detail is upstream prose in disguise. */
function tokenDetails(
  details: Record<string, SafeDetailValue>,
  options: McpNormalizeOptions,
): Record<string, SafeDetailValue> {
  const kept: Record<string, SafeDetailValue> = {};
  for (const [key, value] of Object.entries(details)) {
    if (key === 'field') {
      if (typeof value === 'string' && options.inputFields?.includes(value)) kept[key] = value;
      continue;
    }
    if (key === 'allowed_values' && typeof value === 'string') {
      if (value.split(',').every((item) => safeToken(item.trim()) !== undefined)) kept[key] = value;
      continue;
    }
    const token = safeToken(value);
    if (token !== undefined) kept[key] = token;
  }
  return kept;
}

function sanitizeError(envelope: ToolError, options: McpNormalizeOptions): ToolError {
  const vouched = options.allowedCodes?.includes(envelope.code) === true;
  const code = vouched ? envelope.code : 'UPSTREAM_ERROR';
  return {
    ...envelope,
    code,
    safe_details: tokenDetails(envelope.safe_details, options),
    agent_message: options.trustMessages
      ? envelope.agent_message
      : agentMessage(vouched ? 'TOOL_FAILURE_REPORTED' : 'UPSTREAM_ERROR', envelope.next_action),
    user_message: options.trustMessages ? envelope.user_message : userMessage(envelope.next_action),
  };
}

/** The text blocks of a result, kept (redacted) as a read's result; other block types by kind only. */
function contentSummary(content: unknown[]): unknown[] {
  return content.map((block) => {
    if (!isRecord(block)) return { type: 'unknown' };
    if (block.type === 'text' && typeof block.text === 'string') return { type: 'text', text: block.text };
    if (block.type === 'resource_link' && typeof block.uri === 'string')
      return { type: 'resource_link', uri: block.uri };
    return { type: typeof block.type === 'string' ? block.type : 'unknown' };
  });
}

/**
 * An MCP `CallToolResult` to an envelope:
 * - `structuredContent` carrying an envelope is validated (docs/contract.md §2) and used, with its prose
 *   replaced and only token-shaped details kept; an invalid one, or one whose `ok` contradicts
 *   `isError`, is not trusted;
 * - `isError` with only content blocks is upstream prose: a neutral UPSTREAM_ERROR;
 * - success with `structuredContent` is a success with that result; success told only in text
 *   proves nothing for a write (docs/contract.md §4: do not infer outcomes from strings), so it is verified.
 */
export function normalizeMcpToolResult(result: unknown, options: McpNormalizeOptions): ToolEnvelope {
  if (!isRecord(result)) return invalidResult(options);
  const { content, structuredContent, isError } = result;
  if (content !== undefined && !Array.isArray(content)) return invalidResult(options);
  if (content === undefined && structuredContent === undefined) return invalidResult(options);
  if (isError !== undefined && typeof isError !== 'boolean') return invalidResult(options);
  const failed = isError === true;

  const candidate = envelopeIn(structuredContent);
  if (candidate) {
    const checked = validateEnvelope(
      candidate,
      { operationRef: options.operationRef, sideEffect: options.sideEffect },
      options.limits ?? DEFAULT_ENVELOPE_LIMITS,
    );
    if (!checked.ok) return invalidResult(options);
    const envelope = checked.envelope;
    if (failed && envelope.ok) return invalidResult(options);
    return envelope.ok ? envelope : sanitizeError(envelope, options);
  }

  if (failed) return upstreamError(options);
  const now = options.now.toISOString();
  if (isRecord(structuredContent)) {
    const { value } = redactUpstream(structuredContent);
    return {
      ok: true,
      operation_ref: options.operationRef,
      commit_state: 'committed',
      result: value,
      verification: { checked_at: now },
    };
  }
  if (options.sideEffect === 'write') return uncertainOutcome(options, 'UNVERIFIED_RESULT');
  const { value } = redactUpstream({ content: contentSummary(Array.isArray(content) ? content : []) });
  return {
    ok: true,
    operation_ref: options.operationRef,
    commit_state: 'committed',
    result: value,
    verification: { checked_at: now },
  };
}
