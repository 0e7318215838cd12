/**
 * The part every framework integration shares, with no framework in it: the options a ledgered
 * write tool takes, its operation_ref (docs/integrations.md, "The operation_ref rule"), the client's
 * callLedgeredTool run for it, the approval question a framework's approval surface asks, and the
 * answers for input the tool's schema refuses and for read-only tools.
 */
import {
  approvalGranted,
  callLedgeredTool,
  checked,
  correctInput,
  inputHash,
  modelText,
  operationRefFor,
  type LedgeredToolLedger,
  type LedgeredToolPolicy,
  type LedgeredToolResult,
  type Lookup,
  type ToolCall,
  type ToolEnvelope,
} from '@recovery-ledger/client';

export interface LedgeredWriteOptions<Input> {
  /** A client with a runtime key: it plans, dispatches and records; it never grants an approval. */
  ledger: LedgeredToolLedger;
  /** The tool's name, for the model and the ledger. */
  name: string;
  /** The run (task, thread, conversation) this agent works on: stable across its restarts. */
  runId: string;
  policy: LedgeredToolPolicy;
  /** Calls the provider once with context.idempotencyKey as its idempotency key; answers an envelope. */
  call: ToolCall<Input>;
  /** Finds the write by operation_ref at the provider (verification). */
  lookup: Lookup;
  /** Provider codes the model may see as they are. */
  vouchedCodes?: readonly string[];
  /** The longest the provider call may stay open. */
  callWindowMs?: number;
  /** How long one tool call may wait for a not_before before it tells the model when (default 30 s). */
  maxWaitMs?: number;
  /**
   * The caller's own operation_ref for a call; undefined falls back to operationRefFor({ runId,
   * key, tool, input }). Never return the framework's tool-call id alone: a replayed step gets a new one.
   */
  operationRef?: (input: Input, context: RefContext) => string | undefined;
  /** What tells two intended, identical writes of the run apart (a step id the caller chose). */
  key?: (input: Input, context: RefContext) => string | undefined;
  log?: (line: Record<string, unknown>) => void;
}

export interface RefContext {
  runId: string;
  /** The framework's id for this tool call: it differs on a replay, so it is no operation_ref. */
  toolCallId?: string;
}

export const DEFAULT_MAX_WAIT_MS = 30_000;

export function refOf<Input>(options: LedgeredWriteOptions<Input>, input: Input, context: RefContext): string {
  return (
    options.operationRef?.(input, context) ??
    operationRefFor({ runId: options.runId, tool: options.name, input, key: options.key?.(input, context) })
  );
}

/** One call of the write tool through the ledger (the client's callLedgeredTool). */
export function runLedgeredWrite<Input>(
  options: LedgeredWriteOptions<Input>,
  input: Input,
  context: RefContext & { signal?: AbortSignal },
): Promise<LedgeredToolResult> {
  return callLedgeredTool(options.ledger, {
    tool: options.name,
    operationRef: refOf(options, input, context),
    runId: options.runId,
    input,
    policy: options.policy,
    call: options.call,
    lookup: options.lookup,
    maxWaitMs: options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS,
    ...(options.vouchedCodes ? { vouchedCodes: options.vouchedCodes } : {}),
    ...(options.callWindowMs === undefined ? {} : { callWindowMs: options.callWindowMs }),
    ...(context.signal ? { signal: context.signal } : {}),
    ...(options.log ? { log: options.log } : {}),
  });
}

/**
 * The question a framework's approval surface asks before it runs the tool: true while the ledger
 * holds no grant for this input. The first time, the loop records the request for approval (an
 * attempt that sends nothing), so the ledger shows the step awaiting approval to its approvers.
 */
export async function needsLedgerApproval<Input>(
  options: LedgeredWriteOptions<Input>,
  input: Input,
  context: RefContext,
): Promise<boolean> {
  if (!options.policy.approval_required) return false;
  const ref = refOf(options, input, context);
  if (await approvalGranted(options.ledger, ref, inputHash(input))) return false;
  const result = await runLedgeredWrite(options, input, context);
  return !result.ok;
}

/** The answer for input the tool's own schema refuses: correct_input, and nothing planned or sent. */
export function invalidInputResult(name: string, operationRef: string, fields: readonly string[]): LedgeredToolResult {
  const envelope = checked(
    correctInput({ operationRef, sideEffect: 'write', now: new Date() }, 'INVALID_INPUT', fields[0]),
  );
  return {
    status: 'unplanned',
    envelope,
    modelText: modelText(name, envelope),
    ok: false,
    approvalPending: false,
    toolCalls: 0,
  };
}

/** What a read-only tool's failure tells the model: a stable code and the retry direction only. */
export function readAnswer(envelope: ToolEnvelope): Record<string, unknown> {
  if (envelope.ok) return { ok: true, result: envelope.result };
  return {
    ok: false,
    code: envelope.code,
    category: envelope.category,
    next_action: envelope.next_action,
    retry: envelope.retry,
    agent_message: envelope.agent_message,
  };
}
