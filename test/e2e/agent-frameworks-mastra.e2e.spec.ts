/**
 * The Mastra integration (`@recovery-ledger/agent-frameworks/mastra`) in a real `@mastra/core`
 * Agent, driven by the AI SDK's mock language model (Mastra ships none and runs AI SDK models),
 * against the built ledger over HTTP and the example provider as a process with idempotency off:
 * a second create there is a second invoice. docs/integrations.md, "Mastra".
 */
import { Agent } from '@mastra/core/agent';
import { Mastra } from '@mastra/core/mastra';
import { InMemoryStore } from '@mastra/core/storage';
import { z } from 'zod';
import { ledgeredMastraTool, ledgerOutputOf } from '@recovery-ledger/agent-frameworks/mastra';
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
  return ledgeredMastraTool<InvoiceInput>({
    ...world.writeTool(),
    ...(overrides.call ? { call: overrides.call } : {}),
    policy: { ...world.policy, ...overrides.policy, approval_required: overrides.approval ?? false },
    ledger: world.runtime,
    name: 'create_invoice',
    description: 'Creates an invoice.',
    runId,
    inputSchema: SCHEMA,
  });
}

/** The operation_ref of the run's `step`-th create_invoice step (docs/integrations.md, "The operation_ref rule"). */
function refOf(runId: string, step = 1): string {
  return operationRefFor({ runId, tool: 'create_invoice', step });
}

function agentWith(steps: ScriptedStep[], tool: ReturnType<typeof invoiceTool>) {
  const model = scriptedModel(steps);
  const agent = new Agent({
    id: 'invoicer',
    name: 'invoicer',
    instructions: 'Create the invoices asked for.',
    model: model as never,
    tools: { create_invoice: tool },
  });
  // A suspended run (an approval request) is resumed from the store Mastra keeps its snapshots in.
  const mastra = new Mastra({ agents: { invoicer: agent }, storage: new InMemoryStore(), logger: false });
  return { model, agent: mastra.getAgent('invoicer') };
}

/** Each tool result as the ledger's answer (every tool of these runs is ledgered). */
function ledgerOutputs(parts: Array<{ payload: { result?: unknown } }>) {
  return parts.map((part) => {
    const output = ledgerOutputOf(part);
    if (!output) throw new Error(`not a ledgered tool's result: ${JSON.stringify(part.payload.result)}`);
    return output;
  });
}

async function run(runId: string, steps: ScriptedStep[], tool = invoiceTool(runId)) {
  const { model, agent } = agentWith(steps, tool);
  const result = await agent.generate('Invoice the customer.', { maxSteps: 5 });
  const outputs = ledgerOutputs(result.toolResults);
  return { model, agent, result, outputs };
}

const invoice = (input: InvoiceInput) => ({ toolCalls: [{ tool: 'create_invoice', input }] });

describe('Mastra: a ledgered tool', () => {
  it('the same write asked twice by the model is one invoice', async () => {
    const input = { customer_id: 'cus_mastratwice', amount_cents: 1200, currency: 'EUR' };
    const { outputs, model } = await run('m-twice', [invoice(input), invoice(input), { text: 'done' }]);
    expect(outputs.map((output) => output.ok)).toEqual([true, true]);
    expect(outputs[0].operation_ref).toBe(outputs[1].operation_ref);
    expect(await world.invoicesFor(refOf('m-twice'))).toBe(1);
    expect(promptsSeen(model)).toContain('create_invoice succeeded for operation_ref');
  });

  it('a timeout after the commit is verified as a success: one invoice, and the model is told it succeeded', async () => {
    const input = { customer_id: 'cus_mastratimeout', amount_cents: 1300, currency: 'EUR' };
    const ref = refOf('m-timeout');
    await world.fault({ fault: { kind: 'accept-then-timeout' }, operation_ref: ref });
    const { outputs } = await run('m-timeout', [invoice(input), { text: 'done' }]);
    expect(outputs).toHaveLength(1);
    expect(outputs[0]).toMatchObject({ ok: true, status: 'succeeded' });
    expect(await world.eventTypes(ref)).toContain('VerificationRecorded');
    expect(await world.invoicesFor(ref)).toBe(1);
    expect(await world.createRequests(ref)).toBe(1);
  });

  it('a 429 is waited out until not_before: no call before it, and the model never retries', async () => {
    const input = { customer_id: 'cus_mastra429', amount_cents: 1400, currency: 'EUR' };
    const ref = refOf('m-429');
    await world.fault({ fault: { kind: 'rate-limit', retry_after_s: 1 }, operation_ref: ref });
    const calledAt: number[] = [];
    const call: ToolCall<InvoiceInput> = (value, context) => {
      calledAt.push(Date.now());
      return world.createInvoice(value, context);
    };
    const { outputs, model } = await run('m-429', [invoice(input), { text: 'done' }], invoiceTool('m-429', { call }));
    expect(outputs).toHaveLength(1);
    expect(outputs[0]).toMatchObject({ ok: true, status: 'succeeded' });
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

  it('an approval-gated write: Mastra suspends for approval, a runtime key cannot grant it, Mastra approve alone sends nothing, an approver grant runs it once', async () => {
    const input = { customer_id: 'cus_mastraapprove', amount_cents: 99_000, currency: 'EUR' };
    const ref = refOf('m-approve');
    const tool = invoiceTool('m-approve', { approval: true });

    // 1. Mastra's approval surface: the run suspends on the call; the ledger holds the request.
    const first = agentWith([invoice(input), { text: 'waiting' }], tool);
    const asked = await first.agent.generate('Invoice the customer.', { maxSteps: 5 });
    expect(asked.finishReason).toBe('suspended');
    expect((await world.state(ref)).status).toBe('awaiting_approval');
    expect(await world.createRequests(ref)).toBe(0);

    // 2. The agent's own key cannot record the approval.
    expect(await world.runtimeGrantStatus(ref)).toBe(403);

    // 3. Mastra's approve with no grant in the ledger: execute asks the ledger, which still waits.
    const resumed = await first.agent.approveToolCallGenerate({ runId: asked.runId as string });
    const pending = ledgerOutputs(resumed.toolResults);
    expect(pending).toEqual([expect.objectContaining({ ok: false, approval_pending: true })]);
    expect(await world.createRequests(ref)).toBe(0);

    // 4. A person's grant in the ledger: the next run of the call sends it, once.
    await world.grant(ref);
    const third = await run('m-approve', [invoice(input), invoice(input), { text: 'done' }], tool);
    expect(third.result.finishReason).not.toBe('suspended');
    expect(third.outputs.map((output) => output.ok)).toEqual([true, true]);
    expect(await world.invoicesFor(ref)).toBe(1);
    expect(await world.createRequests(ref)).toBe(1);
  });

  it('malformed tool input: the model sees correct_input, and nothing is planned or sent', async () => {
    const input = { customer_id: 'cus_mastrabad', amount_cents: 'twelve', currency: 'EUR' };
    const { outputs, model } = await run('m-malformed', [invoice(input as unknown as InvoiceInput), { text: 'done' }]);
    expect(outputs).toHaveLength(1);
    expect(outputs[0].envelope).toMatchObject({
      ok: false,
      code: 'INVALID_INPUT',
      next_action: 'correct_input',
      safe_details: { field: 'amount_cents' },
    });
    expect(promptsSeen(model)).toContain('next_action=correct_input');
    await expect(world.state(refOf('m-malformed'))).rejects.toMatchObject({ status: 404 });
    expect(await world.createRequests(refOf('m-malformed'))).toBe(0);
  });

  it('an agent process killed by SIGKILL mid-call and run again: verified, not a second create', async () => {
    const ref = refOf('m-killed');
    await world.fault({ fault: { kind: 'slow', delay_ms: 3000 }, operation_ref: ref });
    const agent = runAgentScript('test/support/agent-scripts/mastra-agent.ts', world, ['--run', 'm-killed']);
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

    const resumed = runAgentScript('test/support/agent-scripts/mastra-agent.ts', world, ['--run', 'm-killed']);
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
    const input = { customer_id: 'cus_mvariant', amount_cents: 1500, currency: 'EUR' };
    // The next create commits and never answers; the lookup that would settle it is unavailable once.
    await world.fault({ fault: { kind: 'accept-then-timeout' } });
    await world.fault({ fault: { kind: 'lookup-unavailable' }, on: 'lookup' });
    const { outputs, model } = await run('m-variant', [
      invoice(input),
      invoice({ ...input, currency: 'eur' }),
      { text: 'done' },
    ]);
    expect(outputs.map((output) => output.ok)).toEqual([false, false]);
    expect(await world.runWrites('m-variant')).toEqual({ requests: 1, invoices: 1 });
    expect(outputs[1].operation_ref).toBe(outputs[0].operation_ref);
    expect(promptsSeen(model)).not.toContain('call verify_operation');
  });

  it('four calls, each spelled differently, under max_attempts 2: at most 2 creates', async () => {
    const tool = invoiceTool('m-bound', { call: world.alwaysRateLimited, policy: { max_attempts: 2 } });
    const spellings = ['EUR', 'eur', 'Eur', 'EUR.'];
    const steps = spellings.map((currency) => invoice({ customer_id: 'cus_mbound', amount_cents: 1600, currency }));
    const { outputs } = await run('m-bound', [...steps, { text: 'done' }], tool);
    expect(outputs).toHaveLength(4);
    expect(outputs.every((output) => !output.ok)).toBe(true);
    expect((await world.runWrites('m-bound')).requests).toBe(2);
  });
});
