/**
 * The Vercel AI SDK integration (`@recovery-ledger/agent-frameworks/ai-sdk`) in the real `ai`
 * package, driven by its own mock language model (`ai/test`), against the built ledger over HTTP
 * and the example provider as a process with idempotency off: a second create there is a second
 * invoice. docs/integrations.md, "Vercel AI SDK".
 */
import { generateText, stepCountIs, type ModelMessage } from 'ai';
import { z } from 'zod';
import { ledgeredTool, ledgerToolApproval } from '@recovery-ledger/agent-frameworks/ai-sdk';
import { operationRefFor, type LedgeredToolPolicy, type ToolCall } from '@recovery-ledger/client';
import {
  runAgentScript,
  startAgentWorld,
  type AgentWorld,
  type InvoiceInput,
} from '../support/agent-framework-harness';
import { promptsSeen, scriptedModel, type ScriptedStep } from '../support/ai-sdk-scripted-model';
import { until } from '../support/until';

jest.setTimeout(90_000);

const SCHEMA = z.object({ customer_id: z.string(), amount_cents: z.number().int(), currency: z.string() });
let world: AgentWorld;

beforeAll(async () => {
  world = await startAgentWorld();
});

afterAll(async () => {
  await world?.stop();
});

function invoiceTool(
  runId: string,
  overrides: { call?: ToolCall<InvoiceInput>; approval?: boolean; policy?: Partial<LedgeredToolPolicy> } = {},
) {
  return ledgeredTool<InvoiceInput>({
    ...world.writeTool(),
    ...(overrides.call ? { call: overrides.call } : {}),
    policy: { ...world.policy, ...overrides.policy, approval_required: overrides.approval ?? false },
    ledger: world.runtime,
    name: 'create_invoice',
    runId,
    inputSchema: SCHEMA,
  });
}

/** The operation_ref of the run's `step`-th create_invoice step (docs/integrations.md, "The operation_ref rule"). */
function refOf(runId: string, step = 1): string {
  return operationRefFor({ runId, tool: 'create_invoice', step });
}

async function run(runId: string, steps: ScriptedStep[], tool = invoiceTool(runId), messages?: ModelMessage[]) {
  const model = scriptedModel(steps);
  const result = await generateText({
    model,
    tools: { create_invoice: tool },
    ...(messages ? { messages } : { prompt: 'Invoice the customer.' }),
    stopWhen: stepCountIs(5),
  });
  // Typed by the tool itself: only a dynamic tool's output is unknown, and this run has none.
  const outputs = result.steps.flatMap((step) =>
    step.toolResults.flatMap((part) => (part.dynamic ? [] : [part.output])),
  );
  return { model, result, outputs };
}

const invoice = (input: InvoiceInput) => ({ toolCalls: [{ tool: 'create_invoice', input }] });

describe('AI SDK: a ledgered tool', () => {
  it('the same write asked twice by the model is one invoice', async () => {
    const input = { customer_id: 'cus_twice', amount_cents: 1200, currency: 'EUR' };
    const { outputs, model } = await run('ai-twice', [invoice(input), invoice(input), { text: 'done' }]);
    expect(outputs.map((output) => output.ok)).toEqual([true, true]);
    expect(outputs[0].operation_ref).toBe(outputs[1].operation_ref);
    expect(await world.invoicesFor(refOf('ai-twice'))).toBe(1);
    // The model read the envelope's words: a success with its evidence, twice.
    expect(promptsSeen(model)).toContain('create_invoice succeeded for operation_ref');
  });

  it('a timeout after the commit is verified as a success: one invoice, and the model is told it succeeded', async () => {
    const input = { customer_id: 'cus_timeout', amount_cents: 1300, currency: 'EUR' };
    const ref = refOf('ai-timeout');
    await world.fault({ fault: { kind: 'accept-then-timeout' }, operation_ref: ref });
    const { outputs, model } = await run('ai-timeout', [invoice(input), { text: 'done' }]);
    expect(outputs).toHaveLength(1);
    expect(outputs[0]).toMatchObject({ ok: true, status: 'succeeded' });
    expect(await world.eventTypes(ref)).toContain('VerificationRecorded');
    expect(await world.invoicesFor(ref)).toBe(1);
    expect(await world.createRequests(ref)).toBe(1);
    expect(promptsSeen(model)).not.toContain('OUTCOME_UNKNOWN');
  });

  it('a 429 is waited out until not_before: no call before it, and the model never retries', async () => {
    const input = { customer_id: 'cus_429', amount_cents: 1400, currency: 'EUR' };
    const ref = refOf('ai-429');
    await world.fault({ fault: { kind: 'rate-limit', retry_after_s: 1 }, operation_ref: ref });
    const calledAt: number[] = [];
    const call: ToolCall<InvoiceInput> = (value, context) => {
      calledAt.push(Date.now());
      return world.createInvoice(value, context);
    };
    const { outputs, model } = await run('ai-429', [invoice(input), { text: 'done' }], invoiceTool('ai-429', { call }));
    expect(outputs).toHaveLength(1);
    expect(outputs[0]).toMatchObject({ ok: true, status: 'succeeded' });
    // One tool call from the model, two from the loop: the second not before the ledger's not_before.
    expect(model.doGenerateCalls).toHaveLength(2);
    expect(calledAt).toHaveLength(2);
    const { events } = await world.runtime.getEvents(ref);
    const limited = events.find(
      (event) => event.type === 'EnvelopeRecorded' && JSON.stringify(event.data).includes('RATE_LIMITED'),
    );
    const notBefore = Date.parse(
      (limited?.data as { envelope: { retry: { not_before: string } } }).envelope.retry.not_before,
    );
    expect(calledAt[1]).toBeGreaterThanOrEqual(notBefore);
    expect(await world.invoicesFor(ref)).toBe(1);
  });

  it('an approval-gated write: the SDK asks approval, a runtime key cannot grant it, the SDK approve alone sends nothing, an approver grant runs it once', async () => {
    const input = { customer_id: 'cus_approve', amount_cents: 99_000, currency: 'EUR' };
    const ref = refOf('ai-approve');
    const tool = invoiceTool('ai-approve', { approval: true });

    // 1. The SDK's approval surface shows the call; the ledger holds the request; nothing was sent.
    const first = await run('ai-approve', [invoice(input), { text: 'waiting' }], tool);
    const request = first.result.content.find((part) => part.type === 'tool-approval-request');
    expect(request).toBeDefined();
    expect((await world.state(ref)).status).toBe('awaiting_approval');
    expect(await world.createRequests(ref)).toBe(0);

    // 2. The agent's own key cannot record the approval.
    expect(await world.runtimeGrantStatus(ref)).toBe(403);

    // 3. The SDK's approve (no grant in the ledger): execute asks the ledger, which still waits.
    const approved: ModelMessage[] = [
      { role: 'user', content: 'Invoice the customer.' },
      ...first.result.response.messages,
      {
        role: 'tool',
        content: [
          {
            type: 'tool-approval-response',
            approvalId: (request as { approvalId: string }).approvalId,
            approved: true,
          },
        ],
      },
    ];
    const second = await run('ai-approve', [{ text: 'still waiting' }], tool, approved);
    // The approved call runs before the model's first step: the model reads its answer in its prompt.
    const seen = promptsSeen(second.model);
    expect(seen).toContain('did not complete: APPROVAL_REQUIRED');
    expect(seen).toContain('next_action=request_approval');
    expect(await world.createRequests(ref)).toBe(0);

    // 4. A person's grant in the ledger: the next run of the call sends it, once.
    await world.grant(ref);
    const third = await run('ai-approve', [invoice(input), invoice(input), { text: 'done' }], tool);
    expect(third.result.content.some((part) => part.type === 'tool-approval-request')).toBe(false);
    expect(third.outputs.map((output) => output.ok)).toEqual([true, true]);
    expect(await world.invoicesFor(ref)).toBe(1);
    expect(await world.createRequests(ref)).toBe(1);
  });

  it('malformed tool input: the model sees correct_input, and nothing is planned or sent', async () => {
    const input = { customer_id: 'cus_bad', amount_cents: 'twelve', currency: 'EUR' };
    const { outputs, model } = await run('ai-malformed', [invoice(input as unknown as InvoiceInput), { text: 'done' }]);
    expect(outputs).toHaveLength(1);
    expect(outputs[0].envelope).toMatchObject({
      ok: false,
      code: 'INVALID_INPUT',
      next_action: 'correct_input',
      safe_details: { field: 'amount_cents' },
    });
    expect(promptsSeen(model)).toContain('next_action=correct_input');
    await expect(world.state(refOf('ai-malformed'))).rejects.toMatchObject({ status: 404 });
    expect(await world.createRequests(refOf('ai-malformed'))).toBe(0);
  });

  it('an agent process killed by SIGKILL mid-call and run again: verified, not a second create', async () => {
    const ref = refOf('ai-killed');
    // The provider holds the create for 3 s, then commits it whether or not anyone still listens.
    await world.fault({ fault: { kind: 'slow', delay_ms: 3000 }, operation_ref: ref });
    const agent = runAgentScript('test/support/agent-scripts/ai-sdk-agent.ts', world, ['--run', 'ai-killed']);
    await until(
      () => world.createRequests(ref),
      (count) => count === 1,
      'the create to reach the provider',
    );
    await agent.kill();
    expect((await world.state(ref)).status).toBe('dispatched');
    await until(
      () => world.invoicesFor(ref),
      (count) => count === 1,
      'the provider to commit the held create',
    );

    const resumed = runAgentScript('test/support/agent-scripts/ai-sdk-agent.ts', world, ['--run', 'ai-killed']);
    const finished = await resumed.line((line) => line.event === 'finished', 'the resumed run to finish');
    expect(await resumed.exited).toBe(0);
    expect(finished.outputs).toEqual([expect.objectContaining({ ok: true, status: 'succeeded' })]);
    expect(resumed.lines()).toContainEqual(
      expect.objectContaining({ event: 'verified', outcome: 'found_committed', operation_ref: ref }),
    );
    expect(await world.createRequests(ref)).toBe(1);
    expect(await world.invoicesFor(ref)).toBe(1);
  });

  it('after an unknown outcome, the model calls again with one harmless change ("EUR" → "eur"): the same step, no second create', async () => {
    const input = { customer_id: 'cus_aivariant', amount_cents: 1500, currency: 'EUR' };
    // The next create commits and never answers; the lookup that would settle it is unavailable once.
    await world.fault({ fault: { kind: 'accept-then-timeout' } });
    await world.fault({ fault: { kind: 'lookup-unavailable' }, on: 'lookup' });
    const { outputs, model } = await run('ai-variant', [
      invoice(input),
      invoice({ ...input, currency: 'eur' }),
      { text: 'done' },
    ]);
    expect(outputs.map((output) => output.ok)).toEqual([false, false]);
    expect(await world.runWrites('ai-variant')).toEqual({ requests: 1, invoices: 1 });
    expect(outputs[1].operation_ref).toBe(outputs[0].operation_ref);
    // The model is told what it can do: it has no verify tool and no operation_ref argument.
    expect(promptsSeen(model)).not.toContain('call verify_operation');
  });

  it('four calls, each spelled differently, under max_attempts 2: at most 2 creates', async () => {
    const tool = invoiceTool('ai-bound', { call: world.alwaysRateLimited, policy: { max_attempts: 2 } });
    const spellings = ['EUR', 'eur', 'Eur', 'EUR.'];
    const steps = spellings.map((currency) => invoice({ customer_id: 'cus_aibound', amount_cents: 1600, currency }));
    const { outputs } = await run('ai-bound', [...steps, { text: 'done' }], tool);
    expect(outputs).toHaveLength(4);
    expect(outputs.every((output) => !output.ok)).toBe(true);
    expect((await world.runWrites('ai-bound')).requests).toBe(2);
  });

  it('a provider 400: the model reads the invalid field and what it can do, and its corrected call is the same step', async () => {
    const input = { customer_id: 'cus_ai400', amount_cents: 1700, currency: 'EUR' };
    await world.fault({ fault: { kind: 'bad-request', field: 'customer_id' } });
    const { outputs, model } = await run('ai-400', [
      invoice(input),
      invoice({ ...input, customer_id: 'cus_ai400fixed' }),
      { text: 'done' },
    ]);
    expect(outputs.map((output) => output.ok)).toEqual([false, true]);
    expect(outputs[1].operation_ref).toBe(outputs[0].operation_ref);
    const seen = promptsSeen(model);
    expect(seen).toContain('did not complete: INVALID_INPUT. field=customer_id');
    expect(seen).toContain('Call the tool again with corrected input: that call continues this same operation');
    expect(seen).not.toContain('same operation_ref');
    expect(await world.runWrites('ai-400')).toEqual({ requests: 2, invoices: 1 });
  });

  it("AI SDK 7's own approval API (toolApproval: ledgerToolApproval(tools)): the call asks approval, and only an approver's grant runs it, once", async () => {
    const input = { customer_id: 'cus_aitoolapproval', amount_cents: 98_000, currency: 'EUR' };
    const ref = refOf('ai-tool-approval');
    const tools = { create_invoice: invoiceTool('ai-tool-approval', { approval: true }) };
    const call = (steps: ScriptedStep[]) =>
      generateText({
        model: scriptedModel(steps),
        tools,
        toolApproval: ledgerToolApproval(tools),
        prompt: 'Invoice the customer.',
        stopWhen: stepCountIs(5),
      });
    const asked = await call([invoice(input), { text: 'waiting' }]);
    expect(asked.content.some((part) => part.type === 'tool-approval-request')).toBe(true);
    expect((await world.state(ref)).status).toBe('awaiting_approval');
    expect(await world.createRequests(ref)).toBe(0);

    await world.grant(ref);
    const granted = await call([invoice(input), { text: 'done' }]);
    expect(granted.content.some((part) => part.type === 'tool-approval-request')).toBe(false);
    expect(await world.invoicesFor(ref)).toBe(1);
    expect(await world.createRequests(ref)).toBe(1);
  });

  it('two tool calls of one model turn are two steps: two invoices', async () => {
    const first = { customer_id: 'cus_aiparallela', amount_cents: 1800, currency: 'EUR' };
    const second = { ...first, customer_id: 'cus_aiparallelb' };
    const turn = {
      toolCalls: [
        { tool: 'create_invoice', input: first },
        { tool: 'create_invoice', input: second },
      ],
    };
    const { outputs } = await run('ai-parallel', [turn, { text: 'done' }]);
    expect(outputs.map((output) => output.ok)).toEqual([true, true]);
    expect(new Set(outputs.map((output) => output.operation_ref)).size).toBe(2);
    expect(await world.runWrites('ai-parallel')).toEqual({ requests: 2, invoices: 2 });
  });
});
