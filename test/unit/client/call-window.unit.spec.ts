/**
 * The dispatcher's duty (docs/reliability.md "When an attempt may still reach the provider") as
 * runAttempt keeps it, against the real decider behind the loopback ledger: the call starts only
 * inside the window the ledger granted (minus the margin), counted on a monotonic clock from the
 * instant the dispatch was sent, and its signal aborts when the window ends.
 */
import {
  callMarginMs,
  executeWrite,
  LedgerClient,
  NORMALIZED_CODE_FACTS,
  type WriteStep,
} from '@recovery-ledger/client';
import { KeyedInvoiceProvider, type InvoiceInput } from './support/keyed-provider';
import { startLoopbackLedger, type LoopbackLedger } from './support/loopback-ledger';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A fetch that stands still once the dispatch's answer is in (a GC pause, a VM stop) and, when
 * asked, removes the call deadline from that answer (a ledger from before the rule).
 */
function pausingFetch(pause: { ms: number; stripDeadline?: boolean }): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    const sent = typeof init?.body === 'string' ? init.body : '';
    if (!sent.includes('"AttemptDispatched"')) return response;
    const body = (await response.json()) as { state?: Record<string, unknown> };
    if (pause.stripDeadline && body.state) delete body.state.call_deadline;
    await sleep(pause.ms);
    return new Response(JSON.stringify(body), { status: response.status, headers: response.headers });
  };
}

describe('the call window', () => {
  let ledger: LoopbackLedger;
  let provider: KeyedInvoiceProvider;
  let step: WriteStep<InvoiceInput>;
  const client = (fetchImpl?: typeof fetch) =>
    new LedgerClient({
      baseUrl: ledger.baseUrl,
      sleep: async () => undefined,
      ...(fetchImpl ? { fetch: fetchImpl } : {}),
    });
  const eventsOf = async () => ledger.events(step.operationRef);

  beforeEach(async () => {
    ledger = await startLoopbackLedger();
    provider = new KeyedInvoiceProvider(() => ledger.now());
    step = {
      operationRef: 'run_90/step_1',
      runId: 'run_90',
      tool: 'create_invoice',
      input: { customer_id: 'cus_1', amount_cents: 700 },
      // A 200 ms call window: 150 ms to start the call in, after the 50 ms margin.
      policy: { max_attempts: 3, consistency_window_ms: 1000, dispatch_timeout_ms: 200 },
    };
  });
  afterEach(() => ledger.close());

  it('has a margin of 10 % of the window, at least 50 ms', () => {
    expect(callMarginMs(60_000)).toBe(6_000);
    expect(callMarginMs(1_000)).toBe(100);
    expect(callMarginMs(200)).toBe(50);
    expect(callMarginMs(0)).toBe(50);
  });

  it('a pause between the grant and the call past the window: the tool is not called, CALL_WINDOW_PASSED is recorded', async () => {
    const outcome = await executeWrite(client(pausingFetch({ ms: 300 })), step, provider.createInvoice, {
      now: () => ledger.now(),
    });
    expect(provider.calls).toHaveLength(0);
    expect(outcome).toMatchObject({
      kind: 'recorded',
      toolCalled: false,
      attempt: 1,
      status: 'retry_scheduled',
      directive: { next_action: 'wait_and_retry' },
      envelope: {
        ok: false,
        code: 'CALL_WINDOW_PASSED',
        category: 'internal',
        commit_state: 'not_committed',
        next_action: 'wait_and_retry',
        retry: {
          directive: 'after_delay',
          not_before: new Date(ledger.now().getTime() + 1000).toISOString(),
          max_attempts_remaining: 3,
        },
        agent_message: `${NORMALIZED_CODE_FACTS.CALL_WINDOW_PASSED} A new attempt may run after not_before.`,
      },
    });
    const recorded = (await eventsOf()).find((event) => event.type === 'EnvelopeRecorded')!;
    expect(recorded.data).toMatchObject({ attempt: 1, envelope: { code: 'CALL_WINDOW_PASSED' } });
  });

  it('a call still open when the window ends is aborted through its signal, and its outcome is verified', async () => {
    // A second: room to start the call on a loaded machine; the signal ends it 900 ms after the send.
    step.policy = { ...step.policy, dispatch_timeout_ms: 1_000 };
    const reasons: unknown[] = [];
    const outcome = await executeWrite(
      client(),
      step,
      (_input, context) =>
        new Promise((_resolve, reject) => {
          context.signal!.addEventListener('abort', () => {
            reasons.push(context.signal!.reason);
            reject(context.signal!.reason);
          });
        }),
      { now: () => ledger.now() },
    );
    expect(reasons).toHaveLength(1);
    expect((reasons[0] as Error).name).toBe('TimeoutError');
    expect(outcome).toMatchObject({
      kind: 'recorded',
      toolCalled: true,
      status: 'verifying',
      envelope: { code: 'OUTCOME_UNKNOWN', commit_state: 'unknown' },
    });
  });

  it('declares callWindowMs as call_window_ms; the ledger bounds the call deadline by it', async () => {
    step.policy = { ...step.policy, dispatch_timeout_ms: 60_000 };
    await executeWrite(client(), step, provider.createInvoice, { now: () => ledger.now(), callWindowMs: 5_000 });
    const dispatch = (await eventsOf()).find((event) => event.type === 'AttemptDispatched')!;
    expect(dispatch.data).toMatchObject({
      call_window_ms: 5_000,
      call_deadline: new Date(ledger.now().getTime() + 5_000).toISOString(),
    });
    expect(provider.calls).toHaveLength(1);
  });

  it('without a call deadline in the answer the call is not bounded, unless the dispatcher declared a window', async () => {
    step.policy = { ...step.policy, dispatch_timeout_ms: 60_000 };
    const unbounded = await executeWrite(
      client(pausingFetch({ ms: 300, stripDeadline: true })),
      step,
      provider.createInvoice,
      { now: () => ledger.now() },
    );
    expect(unbounded).toMatchObject({ toolCalled: true, status: 'succeeded' });

    step = { ...step, operationRef: 'run_90/step_2' };
    const declared = await executeWrite(
      client(pausingFetch({ ms: 300, stripDeadline: true })),
      step,
      provider.createInvoice,
      {
        now: () => ledger.now(),
        callWindowMs: 200,
      },
    );
    expect(declared).toMatchObject({ toolCalled: false, envelope: { code: 'CALL_WINDOW_PASSED' } });
    expect(provider.calls).toHaveLength(1);
  });

  it('refuses a call window out of range before anything is dispatched', async () => {
    for (const callWindowMs of [0, 1.5, 86_400_001]) {
      await expect(executeWrite(client(), step, provider.createInvoice, { callWindowMs })).rejects.toThrow(RangeError);
    }
    expect((await eventsOf()).filter((event) => event.type === 'AttemptDispatched')).toHaveLength(0);
  });
});
