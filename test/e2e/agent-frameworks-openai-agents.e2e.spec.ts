/**
 * The OpenAI Agents SDK integration (`@recovery-ledger/agent-frameworks/openai-agents`) in the real
 * `@openai/agents` package, driven by a `Model` the test scripts, against the built ledger over HTTP
 * and the example provider as a process with idempotency off: a second create there is a second
 * invoice. docs/integrations.md, "OpenAI Agents SDK".
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, RunState, run as runAgent, setTracingDisabled, type RunResult } from '@openai/agents';
import { z } from 'zod';
import {
  ledgeredAgentsTool,
  type AgentsTool,
  type LedgeredAgentsToolOutput,
} from '@recovery-ledger/agent-frameworks/openai-agents';
import { operationRefFor, type LedgeredToolPolicy, type ToolCall } from '@recovery-ledger/client';
import {
  runAgentScript,
  startAgentWorld,
  type AgentWorld,
  type InvoiceInput,
} from '../support/agent-framework-harness';
import { inputsSeen, scriptedAgentsModel, type ScriptedTurn } from '../support/openai-agents-scripted-model';
import { until } from '../support/until';

jest.setTimeout(90_000);
setTracingDisabled(true);

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
  return ledgeredAgentsTool<InvoiceInput>({
    ...world.writeTool(),
    ...(overrides.call ? { call: overrides.call } : {}),
    policy: { ...world.policy, ...overrides.policy, approval_required: overrides.approval ?? false },
    ledger: world.runtime,
    name: 'create_invoice',
    description: 'Creates an invoice.',
    runId,
    parameters: SCHEMA,
  });
}

/** The operation_ref of the run's `step`-th create_invoice step (docs/integrations.md, "The operation_ref rule"). */
function refOf(runId: string, step = 1): string {
  return operationRefFor({ runId, tool: 'create_invoice', step });
}

function outputsOf(result: RunResult<any, any>): LedgeredAgentsToolOutput[] {
  return result.newItems
    .filter((item) => item.type === 'tool_call_output_item')
    .map((item) => (item as { customData?: { ledger: LedgeredAgentsToolOutput } }).customData!.ledger);
}

async function run(runId: string, turns: ScriptedTurn[], tool: AgentsTool = invoiceTool(runId)) {
  const model = scriptedAgentsModel(turns);
  const agent = new Agent({ name: 'billing', model, tools: [tool] });
  const result = await runAgent(agent, 'Invoice the customer.', { maxTurns: 5 });
  return { model, agent, result, outputs: outputsOf(result) };
}

const invoice = (input: InvoiceInput) => ({ toolCalls: [{ tool: 'create_invoice', input }] });

describe('OpenAI Agents SDK: a ledgered tool', () => {
  it('the same write asked twice by the model is one invoice', async () => {
    const input = { customer_id: 'cus_oatwice', amount_cents: 1200, currency: 'EUR' };
    const { outputs, model } = await run('oa-twice', [invoice(input), invoice(input), { text: 'done' }]);
    expect(outputs.map((output) => output.ok)).toEqual([true, true]);
    expect(outputs[0].operation_ref).toBe(outputs[1].operation_ref);
    expect(await world.invoicesFor(refOf('oa-twice'))).toBe(1);
    // The model read the envelope's words: a success with its evidence.
    expect(inputsSeen(model)).toContain('create_invoice succeeded for operation_ref');
  });

  it('a timeout after the commit is verified as a success: one invoice, and the model is told it succeeded', async () => {
    const input = { customer_id: 'cus_oatimeout', amount_cents: 1300, currency: 'EUR' };
    const ref = refOf('oa-timeout');
    await world.fault({ fault: { kind: 'accept-then-timeout' }, operation_ref: ref });
    const { outputs, model } = await run('oa-timeout', [invoice(input), { text: 'done' }]);
    expect(outputs).toHaveLength(1);
    expect(outputs[0]).toMatchObject({ ok: true, status: 'succeeded' });
    expect(await world.eventTypes(ref)).toContain('VerificationRecorded');
    expect(await world.invoicesFor(ref)).toBe(1);
    expect(await world.createRequests(ref)).toBe(1);
    expect(inputsSeen(model)).not.toContain('OUTCOME_UNKNOWN');
  });

  it('a 429 is waited out until not_before: no call before it, and the model never retries', async () => {
    const input = { customer_id: 'cus_oa429', amount_cents: 1400, currency: 'EUR' };
    const ref = refOf('oa-429');
    await world.fault({ fault: { kind: 'rate-limit', retry_after_s: 1 }, operation_ref: ref });
    const calledAt: number[] = [];
    const call: ToolCall<InvoiceInput> = (value, context) => {
      calledAt.push(Date.now());
      return world.createInvoice(value, context);
    };
    const { outputs, model } = await run('oa-429', [invoice(input), { text: 'done' }], invoiceTool('oa-429', { call }));
    expect(outputs).toHaveLength(1);
    expect(outputs[0]).toMatchObject({ ok: true, status: 'succeeded' });
    // One tool call from the model, two from the loop: the second not before the ledger's not_before.
    expect(model.requests).toHaveLength(2);
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

  it('an approval-gated write: an interruption, a runtime key cannot grant it, state.approve alone sends nothing, an approver grant runs it once', async () => {
    const input = { customer_id: 'cus_oaapprove', amount_cents: 99_000, currency: 'EUR' };
    const ref = refOf('oa-approve');
    const tool = invoiceTool('oa-approve', { approval: true });

    // 1. The SDK's interruption shows the call; the ledger holds the request; nothing was sent.
    const first = await run('oa-approve', [invoice(input), { text: 'waiting' }], tool);
    expect(first.result.interruptions.map((item) => item.name)).toEqual(['create_invoice']);
    expect((await world.state(ref)).status).toBe('awaiting_approval');
    expect(await world.createRequests(ref)).toBe(0);

    // 2. The agent's own key cannot record the approval.
    expect(await world.runtimeGrantStatus(ref)).toBe(403);

    // 3. The SDK's approve on a saved RunState (no grant in the ledger): execute asks the ledger, which still waits.
    const saved = first.result.state.toString();
    const state = await RunState.fromString(first.agent, saved);
    for (const item of state.getInterruptions()) state.approve(item);
    const second = await runAgent(first.agent, state, { maxTurns: 5 });
    expect(outputsOf(second)).toEqual([expect.objectContaining({ ok: false, approval_pending: true })]);
    const seen = inputsSeen(first.model);
    expect(seen).toContain('did not complete: APPROVAL_REQUIRED');
    expect(seen).toContain('next_action=request_approval');
    expect(await world.createRequests(ref)).toBe(0);

    // 4. A person's grant in the ledger: the same saved RunState resumed again sends it, once.
    await world.grant(ref);
    const again = await RunState.fromString(first.agent, saved);
    for (const item of again.getInterruptions()) again.approve(item);
    const third = await runAgent(first.agent, again, { maxTurns: 5 });
    expect(third.interruptions).toHaveLength(0);
    expect(outputsOf(third)).toEqual([expect.objectContaining({ ok: true, status: 'succeeded' })]);
    // A fresh run of the same call in the same run id: no interruption now, and still one invoice.
    const fourth = await run('oa-approve', [invoice(input), { text: 'done' }], tool);
    expect(fourth.result.interruptions).toHaveLength(0);
    expect(fourth.outputs).toEqual([expect.objectContaining({ ok: true })]);
    expect(await world.invoicesFor(ref)).toBe(1);
    expect(await world.createRequests(ref)).toBe(1);
  });

  it('malformed tool input: the model sees correct_input, and nothing is planned or sent', async () => {
    const input = { customer_id: 'cus_oabad', amount_cents: 'twelve', currency: 'EUR' };
    const { outputs, model } = await run(
      'oa-malformed',
      [invoice(input as unknown as InvoiceInput), { text: 'done' }],
      invoiceTool('oa-malformed', { approval: true }),
    );
    expect(outputs).toHaveLength(1);
    expect(outputs[0].envelope).toMatchObject({
      ok: false,
      code: 'INVALID_INPUT',
      next_action: 'correct_input',
      safe_details: { field: 'amount_cents' },
    });
    expect(inputsSeen(model)).toContain('next_action=correct_input');
    await expect(world.state(refOf('oa-malformed'))).rejects.toMatchObject({ status: 404 });
    expect(await world.createRequests(refOf('oa-malformed'))).toBe(0);
  });

  it('an agent process killed by SIGKILL mid-call and resumed from its RunState: verified, not a second create', async () => {
    const ref = refOf('oa-killed');
    const stateFile = join(mkdtempSync(join(tmpdir(), 'oa-agent-')), 'run-state.json');
    const script = 'test/support/agent-scripts/openai-agents-agent.ts';
    const args = ['--run', 'oa-killed', '--state', stateFile];

    // The run stops at the approval interruption and saves its RunState; an approver grants.
    const asked = runAgentScript(script, world, args);
    await asked.line((line) => line.event === 'interrupted', 'the approval interruption');
    expect(await asked.exited).toBe(0);
    await world.grant(ref);

    // Resumed, it sends the create; the provider holds it for 3 s and the process dies inside.
    await world.fault({ fault: { kind: 'slow', delay_ms: 3000 }, operation_ref: ref });
    const sending = runAgentScript(script, world, args);
    await until(
      () => world.createRequests(ref),
      (count) => count === 1,
      'the create to reach the provider',
    );
    await sending.kill();
    expect((await world.state(ref)).status).toBe('dispatched');
    await until(
      () => world.invoicesFor(ref),
      (count) => count === 1,
      'the provider to commit the held create',
    );

    // The same saved RunState resumed again: the ledger verifies, nothing is sent twice.
    const resumed = runAgentScript(script, world, args);
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
    const input = { customer_id: 'cus_oavariant', amount_cents: 1500, currency: 'EUR' };
    // The next create commits and never answers; the lookup that would settle it is unavailable once.
    await world.fault({ fault: { kind: 'accept-then-timeout' } });
    await world.fault({ fault: { kind: 'lookup-unavailable' }, on: 'lookup' });
    const { outputs, model } = await run('oa-variant', [
      invoice(input),
      invoice({ ...input, currency: 'eur' }),
      { text: 'done' },
    ]);
    expect(outputs.map((output) => output.ok)).toEqual([false, false]);
    expect(await world.runWrites('oa-variant')).toEqual({ requests: 1, invoices: 1 });
    expect(outputs[1].operation_ref).toBe(outputs[0].operation_ref);
    expect(inputsSeen(model)).not.toContain('call verify_operation');
  });

  it('four calls, each spelled differently, under max_attempts 2: at most 2 creates', async () => {
    const tool = invoiceTool('oa-bound', { call: world.alwaysRateLimited, policy: { max_attempts: 2 } });
    const spellings = ['EUR', 'eur', 'Eur', 'EUR.'];
    const turns = spellings.map((currency) => invoice({ customer_id: 'cus_oabound', amount_cents: 1600, currency }));
    const { outputs } = await run('oa-bound', [...turns, { text: 'done' }], tool);
    expect(outputs).toHaveLength(4);
    expect(outputs.every((output) => !output.ok)).toBe(true);
    expect((await world.runWrites('oa-bound')).requests).toBe(2);
  });
});
