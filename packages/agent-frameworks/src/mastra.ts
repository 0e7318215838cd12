/**
 * Mastra (`@mastra/core` 1): a createTool whose execute runs through the ledger, and whose
 * requireApproval is the ledger's approval (docs/integrations.md, "Mastra"). The model reads the
 * envelope's stable fields and agent_message (toModelOutput), never the provider's prose.
 */
import { createTool } from '@mastra/core/tools';
import type { ToolEnvelope } from '@recovery-ledger/client';
import { LedgeredWrite, readAnswer, type LedgeredWriteOptions } from './ledgered-write';

export type { LedgeredWriteOptions } from './ledgered-write';

/** The Standard Schema face of a schema (zod 3.24+/4, valibot, arktype all have one). */
interface StandardSchemaLike<Input> {
  '~standard': {
    validate: (value: unknown) => unknown;
  } & Record<string, unknown>;
  readonly __input?: Input;
}

export interface LedgeredMastraToolOptions<Input> extends LedgeredWriteOptions<Input> {
  description: string;
  /** The tool's input schema (zod, or any Standard Schema with JSON Schema). */
  inputSchema: StandardSchemaLike<Input> | object;
}

/** What execute answers Mastra (tool results); the model reads `model_text` only (toModelOutput). */
export interface LedgeredMastraToolOutput {
  ok: boolean;
  status: string;
  approval_pending: boolean;
  not_before?: string;
  operation_ref: string;
  envelope: ToolEnvelope;
  model_text: string;
}

/**
 * The ledger's answer in one of a Mastra run's tool results (`result.toolResults`), when it is a
 * ledgered tool's: Mastra types every tool result as unknown, so this reads it without a cast.
 */
export function ledgerOutputOf(part: { payload: { result?: unknown } }): LedgeredMastraToolOutput | undefined {
  const output = part.payload.result as Partial<LedgeredMastraToolOutput> | null | undefined;
  if (typeof output !== 'object' || output === null) return undefined;
  const envelope = output.envelope as { operation_ref?: unknown } | undefined;
  const ours =
    typeof output.ok === 'boolean' &&
    typeof output.model_text === 'string' &&
    typeof output.operation_ref === 'string' &&
    envelope?.operation_ref === output.operation_ref;
  return ours ? (output as LedgeredMastraToolOutput) : undefined;
}

type Issues = { issues?: Array<{ path?: Array<PropertyKey | { key: PropertyKey }> }> };

function fieldsOf(result: Issues): string[] {
  const keys = (result.issues ?? []).map((issue) => {
    const first = issue.path?.[0];
    return typeof first === 'object' && first !== null ? first.key : first;
  });
  return [...new Set(keys.filter((key): key is string => typeof key === 'string'))];
}

/**
 * The schema Mastra is given: the tool's own, for the model, with a validation that lets every
 * input through to execute, which validates it itself, so a refused input reaches the model as
 * the envelope's correct_input, not as Mastra's validation prose; nothing is planned or sent.
 */
function passThrough<Input>(schema: StandardSchemaLike<Input>): StandardSchemaLike<Input> {
  const standard = schema['~standard'];
  return Object.assign(Object.create(schema) as StandardSchemaLike<Input>, {
    '~standard': { ...standard, validate: (value: unknown) => ({ value }) },
    safeParse: (value: unknown) => ({ success: true, data: value }),
    parse: (value: unknown) => value,
  });
}

/**
 * A write tool for a Mastra Agent. Build it per run: `runId` names the run; the tool counts its
 * steps in it (docs/integrations.md, "The operation_ref rule"), and Mastra's toolCallId finds the
 * step again when a resumed run executes an approved call.
 */
export function ledgeredMastraTool<Input>(options: LedgeredMastraToolOptions<Input>) {
  const schema = options.inputSchema as StandardSchemaLike<Input>;
  const write = new LedgeredWrite(options);
  return createTool({
    id: options.name,
    description: options.description,
    inputSchema: passThrough(schema) as never,
    // Mastra's approval request shows while the ledger holds no approver's grant for this input;
    // Mastra's own approve only lets execute ask the ledger again.
    ...(options.policy.approval_required
      ? {
          requireApproval: (input: unknown) => write.needsApproval(input as Input, { runId: options.runId }),
        }
      : {}),
    execute: async (input: unknown, context?: { agent?: { toolCallId?: string }; abortSignal?: AbortSignal }) => {
      const toolCallId = context?.agent?.toolCallId;
      const refContext = { runId: options.runId, ...(toolCallId ? { toolCallId } : {}) };
      const checked = (await schema['~standard'].validate(input)) as Issues & { value?: Input };
      const result = checked.issues
        ? await write.invalidInput(input, refContext, fieldsOf(checked))
        : await write.run(checked.value as Input, {
            ...refContext,
            ...(context?.abortSignal ? { signal: context.abortSignal } : {}),
          });
      const output: LedgeredMastraToolOutput = {
        ok: result.ok,
        status: result.status,
        approval_pending: result.approvalPending,
        ...(result.notBefore ? { not_before: result.notBefore } : {}),
        operation_ref: result.envelope.operation_ref,
        envelope: result.envelope,
        model_text: result.modelText,
      };
      return output;
    },
    toModelOutput: (output: LedgeredMastraToolOutput) => ({ type: 'text', value: output.model_text }),
  } as never) as ReturnType<typeof createTool>;
}

export interface ReadMastraToolOptions<Input> {
  name: string;
  description: string;
  inputSchema: StandardSchemaLike<Input> | object;
  /** Calls the provider (sideEffect 'read') and answers an envelope (callHttpTool does). */
  call: (input: Input, options: { signal?: AbortSignal }) => Promise<ToolEnvelope>;
}

/** A read-only tool: not in the ledger; a failure reaches the model as a stable code and retry direction. */
export function readMastraTool<Input>(options: ReadMastraToolOptions<Input>) {
  return createTool({
    id: options.name,
    description: options.description,
    inputSchema: options.inputSchema as never,
    execute: async (input: unknown, context?: { abortSignal?: AbortSignal }) =>
      readAnswer(await options.call(input as Input, context?.abortSignal ? { signal: context.abortSignal } : {})),
  } as never) as ReturnType<typeof createTool>;
}
