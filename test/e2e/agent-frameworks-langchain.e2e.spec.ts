/**
 * The LangChain v1 / LangGraph integration (`@recovery-ledger/agent-frameworks/langchain`) in the
 * real `langchain` and `@langchain/langgraph` packages: a createAgent with LangChain's own fake
 * tool-calling model and the ledger middleware, against the built ledger over HTTP and the example
 * provider as a process with idempotency off (a second create there is a second invoice).
 * docs/integrations.md, "LangChain and LangGraph".
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command, MemorySaver } from '@langchain/langgraph';
import { createAgent, FakeToolCallingModel, tool } from 'langchain';
import { z } from 'zod';
import { ledgerAttempt, ledgerMiddleware } from '@recovery-ledger/agent-frameworks/langchain';
import { operationRefFor, type LedgeredToolPolicy, type ToolCall, type ToolEnvelope } from '@recovery-ledger/client';
import {
  runAgentScript,
  startAgentWorld,
  type AgentWorld,
  type InvoiceInput,
} from '../support/agent-framework-harness';
import { until } from '../support/until';

jest.setTimeout(90_000);

const SCHEMA = z.object({ customer_id: z.string(), amount_cents: z.number().int(), currency: z.string() });
let world: AgentWorld;
let scratch: string;

beforeAll(async () => {
  world = await startAgentWorld();
  scratch = mkdtempSync(join(tmpdir(), 'langchain-agent-'));
});

afterAll(async () => {
  await world?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

/** The operation_ref of the run's `step`-th create_invoice step (docs/integrations.md, "The operation_ref rule"). */
const refOf = (runId: string, step = 1) => operationRefFor({ runId, tool: 'create_invoice', step });
let calls = 0;
const ask = (input: Record<string, unknown>) => [
  { name: 'create_invoice', args: input, id: `call_${++calls}`, type: 'tool_call' as const },
];

/** An agent whose fake model asks for `steps` (one list of tool calls per turn), then stops. */
function agentFor(
  runId: string,
  steps: Array<Array<ReturnType<typeof ask>[number]>>,
  options: { call?: ToolCall<InvoiceInput>; approval?: boolean; policy?: Partial<LedgeredToolPolicy> } = {},
) {
  const provider = options.call ?? world.createInvoice;
  const createInvoice = tool((input) => provider(input as InvoiceInput, ledgerAttempt()), {
    name: 'create_invoice',
    description: 'Creates an invoice.',
    schema: SCHEMA,
  });
  const { call: _call, ...write } = world.writeTool();
  return createAgent({
    model: new FakeToolCallingModel({ toolCalls: [...steps, []] }),
    tools: [createInvoice],
    middleware: [
      ledgerMiddleware({
        create_invoice: {
          ...write,
          policy: { ...world.policy, ...options.policy, approval_required: options.approval ?? false },
          ledger: world.runtime,
          name: 'create_invoice',
          runId,
        },
      }),
    ],
    checkpointer: new MemorySaver(),
  });
}

interface ToolAnswer {
  content: string;
  artifact: ToolEnvelope;
}

function toolAnswers(state: { messages: Array<{ getType(): string }> }): ToolAnswer[] {
  return state.messages.filter((message) => message.getType() === 'tool') as unknown as ToolAnswer[];
}

const start = (agent: ReturnType<typeof agentFor>, thread: string) =>
  agent.invoke(
    { messages: [{ role: 'user', content: 'Invoice the customer.' }] },
    { configurable: { thread_id: thread } },
  );

describe('LangChain: the ledger middleware', () => {
  it('the same write asked twice by the model is one invoice', async () => {
    const input = { customer_id: 'cus_lctwice', amount_cents: 1200, currency: 'EUR' };
    const state = await start(agentFor('lc-twice', [ask(input), ask(input)]), 'lc-twice');
    const answers = toolAnswers(state);
    expect(answers.map((answer) => answer.artifact.ok)).toEqual([true, true]);
    expect(answers[0].content).toContain('create_invoice succeeded for operation_ref');
    expect(await world.invoicesFor(refOf('lc-twice'))).toBe(1);
  });

  it('a timeout after the commit is verified as a success: one invoice, and the model is told it succeeded', async () => {
    const input = { customer_id: 'cus_lctimeout', amount_cents: 1300, currency: 'EUR' };
    const ref = refOf('lc-timeout');
    await world.fault({ fault: { kind: 'accept-then-timeout' }, operation_ref: ref });
    const [answer] = toolAnswers(await start(agentFor('lc-timeout', [ask(input)]), 'lc-timeout'));
    expect(answer.artifact).toMatchObject({ ok: true });
    expect(answer.content).not.toContain('OUTCOME_UNKNOWN');
    expect(await world.eventTypes(ref)).toContain('VerificationRecorded');
    expect(await world.invoicesFor(ref)).toBe(1);
    expect(await world.createRequests(ref)).toBe(1);
  });

  it('a 429 is waited out until not_before: the tool is not called before it, and the model never retries', async () => {
    const input = { customer_id: 'cus_lc429', amount_cents: 1400, currency: 'EUR' };
    const ref = refOf('lc-429');
    await world.fault({ fault: { kind: 'rate-limit', retry_after_s: 1 }, operation_ref: ref });
    const calledAt: number[] = [];
    const call: ToolCall<InvoiceInput> = (value, context) => {
      calledAt.push(Date.now());
      return world.createInvoice(value, context);
    };
    const answers = toolAnswers(await start(agentFor('lc-429', [ask(input)], { call }), 'lc-429'));
    expect(answers).toHaveLength(1);
    expect(answers[0].artifact).toMatchObject({ ok: true });
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

  it('an approval-gated write: LangGraph interrupts, a runtime key cannot grant it, a resume alone sends nothing, an approver grant runs it once', async () => {
    const input = { customer_id: 'cus_lcapprove', amount_cents: 99_000, currency: 'EUR' };
    const ref = refOf('lc-approve');
    const agent = agentFor('lc-approve', [ask(input), ask(input)], { approval: true });
    const config = { configurable: { thread_id: 'lc-approve' } };

    // 1. The graph pauses on the ledger's approval request; nothing was sent.
    const paused = (await start(agent, 'lc-approve')) as unknown as { __interrupt__?: Array<{ value: unknown }> };
    expect(paused.__interrupt__?.[0].value).toMatchObject({ kind: 'recovery_ledger_approval', operation_ref: ref });
    expect((await world.state(ref)).status).toBe('awaiting_approval');
    expect(await world.createRequests(ref)).toBe(0);

    // 2. The agent's own key cannot record the approval.
    expect(await world.runtimeGrantStatus(ref)).toBe(403);

    // 3. LangGraph's resume with an "approve" records nothing: the ledger still waits, nothing is sent.
    const resumed = (await agent.invoke(new Command({ resume: { decision: 'approve' } }), config)) as unknown as {
      messages: Array<{ getType(): string }>;
      __interrupt__?: unknown[];
    };
    expect(toolAnswers(resumed)[0].content).toContain('APPROVAL_REQUIRED');
    expect(resumed.__interrupt__).toBeDefined(); // the model asked again: paused again
    expect(await world.createRequests(ref)).toBe(0);

    // 4. A person's grant in the ledger: the resume sends it, once.
    await world.grant(ref);
    const done = await agent.invoke(new Command({ resume: { decision: 'approve' } }), config);
    const answers = toolAnswers(done as never);
    expect(answers[answers.length - 1].artifact).toMatchObject({ ok: true });
    expect(await world.invoicesFor(ref)).toBe(1);
    expect(await world.createRequests(ref)).toBe(1);
  });

  it('malformed tool input: the model sees correct_input, and nothing is planned or sent', async () => {
    const input = { customer_id: 'cus_lcbad', amount_cents: 'twelve', currency: 'EUR' };
    const [answer] = toolAnswers(await start(agentFor('lc-malformed', [ask(input)]), 'lc-malformed'));
    expect(answer.artifact).toMatchObject({
      ok: false,
      code: 'INVALID_INPUT',
      next_action: 'correct_input',
      safe_details: { field: 'amount_cents' },
    });
    expect(answer.content).toContain('next_action=correct_input');
    await expect(world.state(refOf('lc-malformed'))).rejects.toMatchObject({ status: 404 });
    expect(await world.createRequests(refOf('lc-malformed'))).toBe(0);
  });

  it("an agent process killed by SIGKILL mid-call and resumed with LangGraph's own resume: verified, not a second create", async () => {
    const ref = refOf('lc-killed');
    const checkpoints = join(scratch, 'lc-killed.json');
    const script = 'test/support/agent-scripts/langchain-agent.ts';
    // The provider holds the create for 3 s, then commits it whether or not anyone still listens.
    await world.fault({ fault: { kind: 'slow', delay_ms: 3000 }, operation_ref: ref });
    const agent = runAgentScript(script, world, ['--run', 'lc-killed', '--checkpoints', checkpoints]);
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

    const resumed = runAgentScript(script, world, ['--run', 'lc-killed', '--checkpoints', checkpoints, '--resume']);
    const finished = await resumed.line((line) => line.event === 'finished', 'the resumed run to finish');
    expect(await resumed.exited).toBe(0);
    expect(finished.answers).toEqual([expect.objectContaining({ ok: true })]);
    expect(resumed.lines()).toContainEqual(
      expect.objectContaining({ event: 'verified', outcome: 'found_committed', operation_ref: ref }),
    );
    expect(await world.createRequests(ref)).toBe(1);
    expect(await world.invoicesFor(ref)).toBe(1);
  });

  it('after an unknown outcome, the model calls again with one harmless change ("EUR" → "eur"): the same step, no second create', async () => {
    const input = { customer_id: 'cus_lcvariant', amount_cents: 1500, currency: 'EUR' };
    // The next create commits and never answers; the lookup that would settle it is unavailable once.
    await world.fault({ fault: { kind: 'accept-then-timeout' } });
    await world.fault({ fault: { kind: 'lookup-unavailable' }, on: 'lookup' });
    const state = await start(agentFor('lc-variant', [ask(input), ask({ ...input, currency: 'eur' })]), 'lc-variant');
    const answers = toolAnswers(state);
    expect(answers.map((answer) => answer.artifact.ok)).toEqual([false, false]);
    expect(await world.runWrites('lc-variant')).toEqual({ requests: 1, invoices: 1 });
    expect(answers[1].artifact.operation_ref).toBe(answers[0].artifact.operation_ref);
    expect(answers.map((answer) => answer.content).join('\n')).not.toContain('call verify_operation');
  });

  it('four calls, each spelled differently, under max_attempts 2: at most 2 creates', async () => {
    const spellings = ['EUR', 'eur', 'Eur', 'EUR.'];
    const steps = spellings.map((currency) => ask({ customer_id: 'cus_lcbound', amount_cents: 1600, currency }));
    const agent = agentFor('lc-bound', steps, { call: world.alwaysRateLimited, policy: { max_attempts: 2 } });
    const answers = toolAnswers(await start(agent, 'lc-bound'));
    expect(answers).toHaveLength(4);
    expect(answers.every((answer) => !answer.artifact.ok)).toBe(true);
    expect((await world.runWrites('lc-bound')).requests).toBe(2);
  });
});
