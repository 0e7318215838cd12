/**
 * Read-only tools in each agent-framework integration (docs/integrations.md): not in the ledger,
 * called through each framework's own tool object against the example provider as a process. A
 * success reaches the model with its result; a failure as the envelope's stable code and retry
 * direction, never the provider's own words (its error code `unavailable` here).
 */
import { RunContext } from '@openai/agents';
import { tool as langchainTool } from 'langchain';
import { z } from 'zod';
import { readTool } from '@recovery-ledger/agent-frameworks/ai-sdk';
import { ledgerMiddleware } from '@recovery-ledger/agent-frameworks/langchain';
import { readMastraTool } from '@recovery-ledger/agent-frameworks/mastra';
import { readAgentsTool } from '@recovery-ledger/agent-frameworks/openai-agents';
import { callHttpTool, type ToolEnvelope } from '@recovery-ledger/client';
import { startAgentWorld, type AgentWorld } from '../support/agent-framework-harness';

jest.setTimeout(60_000);

const SCHEMA = z.object({ ref: z.string() });
let world: AgentWorld;

beforeAll(async () => {
  world = await startAgentWorld();
});

afterAll(async () => {
  await world?.stop();
});

/** The provider's lookup as a read tool: GET /invoices?operation_ref=, answered as an envelope. */
const lookupInvoices = (input: { ref: string }, options: { signal?: AbortSignal } = {}) =>
  callHttpTool(
    {
      url: `${world.provider.url}/invoices?operation_ref=${encodeURIComponent(input.ref)}`,
      idempotencyHeader: null,
      ...(options.signal ? { signal: options.signal } : {}),
    },
    { operationRef: `read/${input.ref}`, sideEffect: 'read' },
  );

/** What the model reads from each framework's read tool, as JSON. */
const FRAMEWORKS: Record<string, (ref: string) => Promise<Record<string, unknown>>> = {
  'ai-sdk': async (ref) => {
    const read = readTool({ inputSchema: SCHEMA, call: lookupInvoices }) as unknown as {
      execute: (input: unknown, options: unknown) => Promise<Record<string, unknown>>;
    };
    return read.execute({ ref }, { toolCallId: 'r1', messages: [] });
  },
  'openai-agents': async (ref) => {
    const read = readAgentsTool({
      name: 'get_invoices',
      description: 'Finds invoices.',
      parameters: SCHEMA,
      call: lookupInvoices,
    });
    return JSON.parse(String(await read.invoke(new RunContext(), JSON.stringify({ ref }))));
  },
  mastra: async (ref) => {
    const read = readMastraTool({
      name: 'get_invoices',
      description: 'Finds invoices.',
      inputSchema: SCHEMA,
      call: lookupInvoices,
    }) as unknown as { execute: (input: unknown, context: unknown) => Promise<Record<string, unknown>> };
    return read.execute({ ref }, {});
  },
  langchain: async (ref) => {
    const read = langchainTool((input) => lookupInvoices(input), {
      name: 'get_invoices',
      description: 'Finds invoices.',
      schema: SCHEMA,
    });
    const { wrapToolCall } = ledgerMiddleware({}, { reads: ['get_invoices'] }) as unknown as {
      wrapToolCall: (
        request: unknown,
        handler: (request: { toolCall: unknown }) => Promise<unknown>,
      ) => Promise<{ content: string }>;
    };
    const toolCall = { name: 'get_invoices', args: { ref }, id: 'r1', type: 'tool_call' };
    const message = await wrapToolCall({ toolCall, tool: read, state: { messages: [] }, runtime: {} }, (request) =>
      read.invoke(request.toolCall as never),
    );
    return JSON.parse(message.content) as Record<string, unknown>;
  },
};

describe.each(Object.keys(FRAMEWORKS))('%s: a read-only tool', (framework) => {
  it('passes a success through with its result, and a failure as a stable code and retry direction only', async () => {
    const ref = `read-${framework}`;
    const found = await FRAMEWORKS[framework](ref);
    expect(found).toMatchObject({ ok: true, result: { items: [] } });

    await world.fault({ fault: { kind: 'lookup-unavailable' }, operation_ref: ref, on: 'lookup' });
    const failed = await FRAMEWORKS[framework](ref);
    const direct = (await lookupInvoices({ ref: 'no-fault' })) as ToolEnvelope;
    expect(direct.ok).toBe(true);
    expect(failed).toMatchObject({ ok: false, next_action: 'wait_and_retry', retry: { directive: 'after_delay' } });
    expect(typeof failed.code).toBe('string');
    expect(JSON.stringify(failed)).not.toContain('unavailable"');
    expect(failed).not.toHaveProperty('result');
    expect(Object.keys(failed).sort()).toEqual(['agent_message', 'category', 'code', 'next_action', 'ok', 'retry']);
  });
});
