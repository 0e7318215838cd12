/**
 * The Vercel AI SDK (`ai` 7): a write tool whose execute runs through the ledger, and whose
 * needsApproval is the ledger's approval (docs/integrations.md, "Vercel AI SDK"). The model reads
 * the envelope's stable fields and agent_message (toModelOutput), never the provider's prose.
 */
import { asSchema, jsonSchema, tool, type FlexibleSchema, type Tool } from 'ai';
import type { ToolEnvelope } from '@recovery-ledger/client';
import { LedgeredWrite, readAnswer, type LedgeredWriteOptions } from './ledgered-write';

export type { LedgeredWriteOptions } from './ledgered-write';

export interface LedgeredAiToolOptions<Input> extends LedgeredWriteOptions<Input> {
  description?: string;
  /** The tool's input schema (zod, JSON Schema through `jsonSchema`, a Standard Schema). */
  inputSchema: FlexibleSchema<Input>;
}

/** What execute answers the application (result.toolResults); the model reads `model_text` only. */
export interface LedgeredAiToolOutput {
  ok: boolean;
  status: string;
  approval_pending: boolean;
  not_before?: string;
  operation_ref: string;
  envelope: ToolEnvelope;
  model_text: string;
}

/** The field names a failed validation names (zod and Standard Schema issues carry a path). */
function invalidFields(error: unknown): string[] {
  const issues = ((error as { cause?: { issues?: unknown } })?.cause?.issues ??
    (error as { issues?: unknown })?.issues) as Array<{ path?: unknown[] }> | undefined;
  if (!Array.isArray(issues)) return [];
  return [...new Set(issues.map((issue) => issue.path?.[0]).filter((key): key is string => typeof key === 'string'))];
}

/**
 * The schema the SDK is given: the tool's own JSON Schema for the model, and a validation that
 * lets every input through to execute, which validates it itself. A refused input then reaches the
 * model as the envelope's correct_input, not as the SDK's validation prose; nothing is sent.
 */
function passThrough<Input>(schema: FlexibleSchema<Input>) {
  const own = asSchema(schema);
  return jsonSchema<Input>(() => own.jsonSchema, { validate: (value) => ({ success: true, value: value as Input }) });
}

/**
 * A write tool for generateText / streamText / ToolLoopAgent. Build the tools per run: `runId`
 * names the run; the tool counts its steps in it (docs/integrations.md, "The operation_ref rule"),
 * and the SDK's toolCallId finds the step again when the SDK runs an approved call.
 */
export function ledgeredTool<Input>(options: LedgeredAiToolOptions<Input>): Tool<Input, LedgeredAiToolOutput> {
  const own = asSchema(options.inputSchema);
  const write = new LedgeredWrite(options);
  const question = (input: Input, toolCallId: string) =>
    write.needsApproval(input, { runId: options.runId, toolCallId });
  const approval = options.policy.approval_required
    ? {
        // The SDK's approval request shows while the ledger holds no approver's grant; the SDK's own
        // approve only lets execute ask the ledger again. Deprecated in AI SDK 7 for the call's own
        // toolApproval (ledgerToolApproval), which the SDK asks first when both are there.
        needsApproval: (input: Input, { toolCallId }: { toolCallId: string }) => question(input, toolCallId),
      }
    : {};
  const made = tool<Input, LedgeredAiToolOutput, Record<string, never>>({
    ...(options.description ? { description: options.description } : {}),
    inputSchema: passThrough(options.inputSchema),
    ...approval,
    execute: async (input, { toolCallId, abortSignal }) => {
      const context = { runId: options.runId, toolCallId };
      const valid = own.validate ? await own.validate(input) : { success: true as const, value: input };
      const result = valid.success
        ? await write.run(valid.value, { ...context, ...(abortSignal ? { signal: abortSignal } : {}) })
        : await write.invalidInput(input, context, invalidFields(valid.error));
      return {
        ok: result.ok,
        status: result.status,
        approval_pending: result.approvalPending,
        ...(result.notBefore ? { not_before: result.notBefore } : {}),
        operation_ref: result.envelope.operation_ref,
        envelope: result.envelope,
        model_text: result.modelText,
      };
    },
    toModelOutput: ({ output }) => ({ type: 'text', value: output.model_text }),
  } as Tool<Input, LedgeredAiToolOutput, Record<string, never>>);
  if (options.policy.approval_required) questions.set(made, question as ApprovalQuestion);
  return made;
}

type ApprovalQuestion = (input: unknown, toolCallId: string) => Promise<boolean>;
/** The ledger's approval question of each ledgered tool that needs one. */
const questions = new WeakMap<object, ApprovalQuestion>();

/** What the SDK's toolApproval takes for one tool (AI SDK 7's current approval API). */
export type LedgerApprovalStatus = (
  input: unknown,
  options: { toolCallId: string },
) => Promise<'user-approval' | 'not-applicable'>;

/**
 * The SDK's current approval API (AI SDK 7, `generateText({ tools, toolApproval:
 * ledgerToolApproval(tools) })`, also streamText and ToolLoopAgent): for every ledgered tool whose
 * policy asks approval, `user-approval` while the ledger holds no approver's grant for this input
 * (the first time, the step is recorded awaiting approval), `not-applicable` once it does. Other
 * tools are left out, so their own settings apply.
 */
export function ledgerToolApproval<Tools extends Record<string, unknown>>(
  tools: Tools,
): { [Name in keyof Tools]?: LedgerApprovalStatus } {
  const statuses: { [Name in keyof Tools]?: LedgerApprovalStatus } = {};
  for (const name of Object.keys(tools) as Array<keyof Tools>) {
    const question = questions.get(tools[name] as object);
    if (!question) continue;
    statuses[name] = async (input, { toolCallId }) =>
      (await question(input, toolCallId)) ? 'user-approval' : 'not-applicable';
  }
  return statuses;
}

export interface ReadAiToolOptions<Input> {
  description?: string;
  inputSchema: FlexibleSchema<Input>;
  /** Calls the provider (sideEffect 'read') and answers an envelope (callHttpTool does). */
  call: (input: Input, options: { signal?: AbortSignal }) => Promise<ToolEnvelope>;
}

/** A read-only tool: not in the ledger; a failure reaches the model as a stable code and retry direction. */
export function readTool<Input>(options: ReadAiToolOptions<Input>): Tool<Input, Record<string, unknown>> {
  return tool<Input, Record<string, unknown>, Record<string, never>>({
    ...(options.description ? { description: options.description } : {}),
    inputSchema: options.inputSchema,
    execute: async (input, { abortSignal }) =>
      readAnswer(await options.call(input, abortSignal ? { signal: abortSignal } : {})),
  } as Tool<Input, Record<string, unknown>, Record<string, never>>);
}
