/**
 * LangChain v1 / LangGraph (`langchain` 1, `@langchain/langgraph` 1): an agent middleware whose
 * wrapToolCall runs each call of a ledgered write tool through the ledger (docs/integrations.md,
 * "LangChain and LangGraph"). The tool itself is the provider call: the middleware calls its
 * handler once per attempt the ledger grants, or not at all, and the tool reads that attempt's
 * idempotency key with ledgerAttempt(). An approval the ledger asks for pauses the graph with
 * LangGraph's interrupt; a resume records nothing: only an approver's grant in the ledger lets
 * the write run. The model reads the envelope's stable fields and agent_message, never the
 * provider's prose.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { ToolMessage } from '@langchain/core/messages';
import { interrupt } from '@langchain/langgraph';
import { createMiddleware } from 'langchain';
import type { ToolCallContext, ToolEnvelope } from '@recovery-ledger/client';
import { LedgeredWrite, readAnswer, type LedgeredWriteOptions } from './ledgered-write';

export type { LedgeredWriteOptions } from './ledgered-write';

const attempts = new AsyncLocalStorage<ToolCallContext>();

/**
 * Inside a ledgered tool's function: the attempt the ledger granted. Give `idempotencyKey` to the
 * provider (it is the operation_ref, the same on every attempt) and `signal` to the request.
 */
export function ledgerAttempt(): ToolCallContext {
  const context = attempts.getStore();
  if (!context) throw new Error('ledgerAttempt() is called only inside a tool the ledger middleware runs');
  return context;
}

/** A write tool the middleware runs: the ledger's options for it, but the call, which is the tool itself. */
export type LedgeredLangChainWrite<Input> = Omit<LedgeredWriteOptions<Input>, 'call'>;

/** What LangGraph's interrupt carries while the ledger waits for an approver. */
export interface LedgerApprovalRequest {
  kind: 'recovery_ledger_approval';
  tool: string;
  operation_ref: string;
  args: unknown;
  /** Resuming records nothing: an approver's ApprovalRecorded in the ledger is the approval. */
  note: string;
}

interface SchemaLike {
  safeParse?: (value: unknown) => {
    success: boolean;
    data?: unknown;
    error?: { issues?: Array<{ path?: unknown[] }> };
  };
}

/** What the tool returned, as an envelope, if it is one: its artifact or its JSON content. */
function envelopeIn(message: unknown): ToolEnvelope | undefined {
  const { artifact, content } = (message ?? {}) as { artifact?: unknown; content?: unknown };
  const isEnvelope = (value: unknown): value is ToolEnvelope =>
    typeof value === 'object' && value !== null && typeof (value as { ok?: unknown }).ok === 'boolean';
  if (isEnvelope(artifact)) return artifact;
  if (typeof content === 'string') {
    try {
      const parsed: unknown = JSON.parse(content);
      if (isEnvelope(parsed)) return parsed;
    } catch {
      /* not JSON: no envelope */
    }
  }
  return undefined;
}

/** A write tool's answer as an envelope; anything else is thrown. */
function envelopeOf(message: unknown): ToolEnvelope {
  const envelope = envelopeIn(message);
  // Thrown, so the SDK treats it as a call whose outcome is unknown: verified before anything is sent again.
  if (!envelope) throw new Error('the tool did not answer an envelope');
  return envelope;
}

function answer(toolCallId: string, name: string, modelText: string, envelope: ToolEnvelope): ToolMessage {
  return new ToolMessage({
    content: modelText,
    tool_call_id: toolCallId,
    name,
    artifact: envelope,
    ...(envelope.ok ? {} : { status: 'error' as const }),
  });
}

export interface LedgerMiddlewareOptions {
  /**
   * Read-only tools, by name: not in the ledger. One that answers an envelope (callHttpTool makes
   * one) reaches the model as its stable code and retry direction, never the provider's prose;
   * any other answer passes through as it is.
   */
  reads?: readonly string[];
}

/**
 * The middleware: `tools` names the ledgered write tools (by the name the agent gives them) with
 * their ledger options; every other tool passes through untouched. Build it per run: `runId` names
 * the run (a thread); each tool counts its steps in it (docs/integrations.md, "The operation_ref
 * rule"), and LangChain's tool-call id finds the step again when a resumed graph runs the call.
 */
export function ledgerMiddleware(
  tools: Record<string, LedgeredLangChainWrite<any>>,
  middlewareOptions: LedgerMiddlewareOptions = {},
) {
  const reads = new Set(middlewareOptions.reads ?? []);
  // The tool itself is each call's provider call (handed to run per request), never this one.
  const unused: LedgeredWriteOptions<unknown>['call'] = () => Promise.reject(new Error('no call outside a request'));
  const writes = new Map(
    Object.entries(tools).map(([name, write]) => [name, new LedgeredWrite<unknown>({ ...write, call: unused })]),
  );
  return createMiddleware({
    name: 'RecoveryLedger',
    wrapToolCall: async (request, handler) => {
      const { toolCall } = request;
      const write = tools[toolCall.name];
      if (!write && reads.has(toolCall.name)) {
        const message = await handler(request);
        const envelope = envelopeIn(message);
        if (!envelope) return message;
        return answer(toolCall.id ?? '', toolCall.name, JSON.stringify(readAnswer(envelope)), envelope);
      }
      const ledgered = writes.get(toolCall.name);
      if (!write || !ledgered) return handler(request);
      const toolCallId = toolCall.id ?? '';
      const context = { runId: write.runId, ...(toolCallId ? { toolCallId } : {}) };
      const schema = (request.tool as { schema?: SchemaLike } | undefined)?.schema;
      const parsed = schema?.safeParse ? schema.safeParse(toolCall.args) : { success: true, data: toolCall.args };
      if (!parsed.success) {
        const fields = (parsed.error?.issues ?? [])
          .map((issue) => issue.path?.[0])
          .filter((key): key is string => typeof key === 'string');
        const refused = await ledgered.invalidInput(toolCall.args, context, fields);
        return answer(toolCallId, toolCall.name, refused.modelText, refused.envelope);
      }
      const input = parsed.data;
      // One handler call per attempt the ledger grants, inside which the tool reads its key.
      const call: LedgeredWriteOptions<unknown>['call'] = (value, attempt) =>
        attempts.run(attempt, async () =>
          envelopeOf(await handler({ ...request, toolCall: { ...toolCall, args: value as Record<string, unknown> } })),
        );
      if (await ledgered.needsApproval(input, context, call)) {
        const step = await ledgered.step(input, context);
        step.done(true);
        const pause: LedgerApprovalRequest = {
          kind: 'recovery_ledger_approval',
          tool: toolCall.name,
          operation_ref: step.ref,
          args: input,
          note: 'waiting for an approver to grant this operation in the ledger; resuming records nothing',
        };
        // Pauses the graph; a resume (Command({ resume })) returns here, and the ledger decides.
        interrupt(pause);
      }
      const result = await ledgered.run(input, context, call);
      return answer(toolCallId, toolCall.name, result.modelText, result.envelope);
    },
  });
}
