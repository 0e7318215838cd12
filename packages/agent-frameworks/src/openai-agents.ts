/**
 * The OpenAI Agents SDK for JS (`@openai/agents` 0.20): a function tool whose execute runs through
 * the ledger, and whose needsApproval is the ledger's approval, so a ledger approval request is the
 * SDK's interruption and the run resumes through RunState (docs/integrations.md, "OpenAI Agents
 * SDK"). The model reads the envelope's stable fields and agent_message, never the provider's prose.
 */
import { tool, type FunctionTool, type RunItem } from '@openai/agents';

/** The SDK's function tool, as an Agent's tools list takes it. */

export type AgentsTool = FunctionTool<any, any, string>;
type JsonObjectSchema = Extract<Parameters<typeof tool>[0], { strict: false }>['parameters'];
import type { ToolEnvelope } from '@recovery-ledger/client';
import { LedgeredWrite, readAnswer, type LedgeredWriteOptions } from './ledgered-write';
import type { LedgeredToolResult } from '@recovery-ledger/client';

export type { LedgeredWriteOptions } from './ledgered-write';

/** A schema with Standard Schema validation (zod 4 is one): the SDK reads its JSON Schema. */
export interface ToolSchema<Input> {
  readonly '~standard': {
    validate(value: unknown): StandardResult<Input> | Promise<StandardResult<Input>>;
  };
}
type StandardResult<Input> =
  | { value: Input; issues?: undefined }
  | { issues: ReadonlyArray<{ path?: ReadonlyArray<PropertyKey | { key: PropertyKey }> }> };

export interface LedgeredAgentsToolOptions<Input> extends LedgeredWriteOptions<Input> {
  description: string;
  /** The tool's input schema: a zod object or another Standard Schema the SDK accepts as parameters. */
  parameters: ToolSchema<Input>;
}

/** What the application reads on the tool's output item (`item.customData`); the model reads `model_text`. */
export interface LedgeredAgentsToolOutput {
  ok: boolean;
  status: string;
  approval_pending: boolean;
  not_before?: string;
  operation_ref: string;
  envelope: ToolEnvelope;
  model_text: string;
}

/**
 * The ledger's answer a run item carries, when it is a ledgered tool's output (`result.newItems`):
 * the envelope and status the application reads, without a cast.
 */
export function ledgerOutputOf(item: RunItem): LedgeredAgentsToolOutput | undefined {
  if (item.type !== 'tool_call_output_item') return undefined;
  const data = item.customData as { ledger?: LedgeredAgentsToolOutput } | undefined;
  return data?.ledger;
}

/**
 * The JSON Schema the SDK itself derives from the schema (it converts zod and Standard Schemas): the
 * ledgered tool is declared non-strict over it, so every input reaches execute, which validates it
 * and answers a refused one with the envelope's correct_input, not with the SDK's parse error.
 */
function jsonSchemaOf(name: string, description: string, parameters: ToolSchema<unknown>): JsonObjectSchema {
  const probe = tool({
    name,
    description,
    parameters: parameters as never,
    execute: () => '',
  }) as unknown as { parameters: JsonObjectSchema };
  return probe.parameters;
}

async function validate<Input>(
  schema: ToolSchema<Input>,
  input: unknown,
): Promise<{ ok: true; value: Input } | { ok: false; fields: string[] }> {
  const result = await schema['~standard'].validate(input);
  if (!result.issues) return { ok: true, value: result.value };
  const fields = result.issues
    .map((issue) => issue.path?.[0])
    .map((key) => (typeof key === 'object' && key !== null ? key.key : key))
    .filter((key): key is string => typeof key === 'string');
  return { ok: false, fields: [...new Set(fields)] };
}

function outputOf(result: LedgeredToolResult): LedgeredAgentsToolOutput {
  return {
    ok: result.ok,
    status: result.status,
    approval_pending: result.approvalPending,
    ...(result.notBefore ? { not_before: result.notBefore } : {}),
    operation_ref: result.envelope.operation_ref,
    envelope: result.envelope,
    model_text: result.modelText,
  };
}

/**
 * A write tool for an Agent. Build it per run: `runId` names the run (the same when a RunState is
 * resumed); the tool counts its steps in it (docs/integrations.md, "The operation_ref rule"), and
 * the SDK's callId finds the step again when a resumed RunState runs an approved call. With policy.approval_required, needsApproval asks the ledger: the
 * run is interrupted while no approver granted this input, and the SDK's own approve (state.approve)
 * only lets execute ask the ledger again; it records nothing.
 */
export function ledgeredAgentsTool<Input>(options: LedgeredAgentsToolOptions<Input>): AgentsTool {
  const outputs = new Map<string, LedgeredAgentsToolOutput>();
  const write = new LedgeredWrite(options);
  const contextOf = (callId: string | undefined) => ({
    runId: options.runId,
    ...(callId ? { toolCallId: callId } : {}),
  });
  const approval = options.policy.approval_required
    ? {
        needsApproval: async (_context: unknown, input: unknown, callId?: string) => {
          // Input the schema refuses needs no approval: execute answers correct_input and sends nothing.
          const valid = await validate(options.parameters, input);
          return valid.ok ? write.needsApproval(valid.value, contextOf(callId)) : false;
        },
      }
    : {};
  return tool<JsonObjectSchema>({
    name: options.name,
    description: options.description,
    strict: false,
    parameters: jsonSchemaOf(options.name, options.description, options.parameters as ToolSchema<unknown>),
    ...approval,
    execute: async (input: unknown, _context, details) => {
      const callId = details?.toolCall?.callId;
      const context = contextOf(callId);
      const valid = await validate(options.parameters, input);
      const result = valid.ok
        ? await write.run(valid.value, { ...context, ...(details?.signal ? { signal: details.signal } : {}) })
        : await write.invalidInput(input, context, valid.fields);
      const output = outputOf(result);
      if (callId) outputs.set(callId, output);
      return output.model_text;
    },
    // The envelope rides on the output item for the application, not in the model's text.
    customDataExtractor: ({ toolCall }) => {
      const output = outputs.get(toolCall.callId);
      outputs.delete(toolCall.callId);
      return output ? { ledger: output } : undefined;
    },
  }) as AgentsTool;
}

export interface ReadAgentsToolOptions<Input> {
  name: string;
  description: string;
  parameters: ToolSchema<Input>;
  /** Calls the provider (sideEffect 'read') and answers an envelope (callHttpTool does). */
  call: (input: Input, options: { signal?: AbortSignal }) => Promise<ToolEnvelope>;
}

/** A read-only tool: not in the ledger; a failure reaches the model as a stable code and retry direction. */
export function readAgentsTool<Input>(options: ReadAgentsToolOptions<Input>): AgentsTool {
  return tool<JsonObjectSchema>({
    name: options.name,
    description: options.description,
    strict: false,
    parameters: jsonSchemaOf(options.name, options.description, options.parameters as ToolSchema<unknown>),
    execute: async (input: unknown, _context, details) => {
      const valid = await validate(options.parameters, input);
      if (!valid.ok)
        return JSON.stringify({ ok: false, code: 'INVALID_INPUT', next_action: 'correct_input', fields: valid.fields });
      const envelope = await options.call(valid.value, details?.signal ? { signal: details.signal } : {});
      return JSON.stringify(readAnswer(envelope));
    },
  }) as AgentsTool;
}
