/**
 * The client's callLedgeredTool, the loop every framework integration runs, against the built
 * ledger over HTTP and the example provider as a process with idempotency off (a second create is
 * a second invoice).
 */
import { callLedgeredTool, operationRefFor } from '@recovery-ledger/client';
import { startAgentWorld, type AgentWorld } from '../support/agent-framework-harness';

jest.setTimeout(60_000);

const INPUT = { customer_id: 'cus_1', amount_cents: 1200, currency: 'EUR' };
let world: AgentWorld;

beforeAll(async () => {
  world = await startAgentWorld();
});

afterAll(async () => {
  await world?.stop();
});

function request(runId: string) {
  const operationRef = operationRefFor({ runId, tool: 'create_invoice', input: INPUT });
  return { ...world.writeTool(), operationRef, runId, input: INPUT };
}

describe('callLedgeredTool', () => {
  it('the same write asked twice is one invoice: the second call replays the first success', async () => {
    const first = await callLedgeredTool(world.runtime, request('loop-twice'));
    const second = await callLedgeredTool(world.runtime, request('loop-twice'));
    expect(first).toMatchObject({ ok: true, status: 'succeeded', toolCalls: 1 });
    expect(second).toMatchObject({ ok: true, status: 'succeeded', toolCalls: 0 });
    expect(await world.invoicesFor(first.envelope.operation_ref)).toBe(1);
  });

  it('a timeout after the commit is verified by the lookup as a success, one invoice', async () => {
    const call = request('loop-timeout');
    await world.fault({ fault: { kind: 'accept-then-timeout' }, operation_ref: call.operationRef });
    const result = await callLedgeredTool(world.runtime, call);
    expect(result).toMatchObject({ ok: true, status: 'succeeded', toolCalls: 1 });
    expect(result.modelText).toContain('succeeded');
    expect(await world.eventTypes(call.operationRef)).toContain('VerificationRecorded');
    expect(await world.invoicesFor(call.operationRef)).toBe(1);
  });
});
