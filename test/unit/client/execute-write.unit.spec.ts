import {
  executeWrite,
  inputHash,
  LedgerClient,
  OutcomeNotRecordedError,
  verify,
  type WriteStep,
} from '@recovery-ledger/client';
import { KeyedInvoiceProvider, type InvoiceInput } from './support/keyed-provider';
import { startLoopbackLedger, type LoopbackLedger } from './support/loopback-ledger';

const WINDOW_MS = 1000;

describe('executeWrite', () => {
  let ledger: LoopbackLedger;
  let client: LedgerClient;
  let provider: KeyedInvoiceProvider;
  let step: WriteStep<InvoiceInput>;
  const options = () => ({ now: () => ledger.now() });
  const run = (overrides: Partial<WriteStep<InvoiceInput>> = {}) =>
    executeWrite(client, { ...step, ...overrides }, provider.createInvoice, options());

  beforeEach(async () => {
    ledger = await startLoopbackLedger();
    client = new LedgerClient({ baseUrl: ledger.baseUrl, sleep: async () => undefined });
    provider = new KeyedInvoiceProvider(() => ledger.now());
    step = {
      operationRef: 'run_81/step_4',
      runId: 'run_81',
      tool: 'create_invoice',
      input: { customer_id: 'cus_1', amount_cents: 1200 },
      policy: { max_attempts: 3, consistency_window_ms: WINDOW_MS, verification_tool: 'get_invoice_by_operation_ref' },
    };
  });
  afterEach(() => ledger.close());

  const dispatches = async () =>
    (await ledger.events(step.operationRef)).filter((event) => event.type === 'AttemptDispatched');

  it('plans, dispatches, calls the tool once with operation_ref as its idempotency key, records the envelope', async () => {
    const outcome = await run();
    expect(outcome).toMatchObject({
      kind: 'recorded',
      status: 'succeeded',
      directive: { next_action: 'none' },
      toolCalled: true,
      attempt: 1,
      envelope: { ok: true, verification: { evidence_ref: 'inv_1' } },
    });
    expect(provider.calls).toHaveLength(1);
    const { signal, callWindow, ...context } = provider.calls[0].context;
    expect(context).toEqual({
      operationRef: 'run_81/step_4',
      idempotencyKey: 'run_81/step_4',
      attempt: 1,
      sideEffect: 'write',
    });
    // The ledger's call deadline, for the provider, and the check to make again at the write.
    const granted = (await ledger.events(step.operationRef)).find((event) => event.type === 'AttemptDispatched');
    expect(callWindow?.deadline).toBe(granted?.data.call_deadline);
    expect(callWindow?.open()).toBe(true);
    // The end of the call window the ledger granted (docs/reliability.md), not yet reached.
    expect(signal).toBeInstanceOf(AbortSignal);
    expect(signal!.aborted).toBe(false);
    const types = (await ledger.events(step.operationRef)).map((event) => event.type);
    expect(types).toEqual([
      'StepPlanned',
      'TransitionRecorded',
      'AttemptDispatched',
      'TransitionRecorded',
      'EnvelopeRecorded',
      'TransitionRecorded',
    ]);
    const plan = (await ledger.events(step.operationRef))[0];
    expect(plan.data).toMatchObject({
      input_hash: inputHash(step.input),
      side_effect: 'write',
      tool: 'create_invoice',
    });
  });

  it('run again after success: the original success is replayed and the tool is not called (duplicate key)', async () => {
    await run();
    const again = await run();
    expect(again).toMatchObject({ kind: 'replayed', status: 'succeeded', toolCalled: false, success: { attempt: 1 } });
    expect(provider.calls).toHaveLength(1);
    expect(provider.invoices.size).toBe(1);
  });

  it('invalid input: needs_input; an unchanged retry is refused without calling the tool; a corrected one runs', async () => {
    provider.then({
      kind: 'status',
      status: 400,
      body: { error: { param: 'customer_id', message: 'no such customer' } },
    });
    const first = await run();
    expect(first).toMatchObject({
      kind: 'recorded',
      status: 'needs_input',
      directive: { next_action: 'correct_input' },
      envelope: { next_action: 'correct_input', safe_details: { field: 'customer_id' } },
    });

    const unchanged = await run();
    expect(unchanged).toMatchObject({ kind: 'refused', toolCalled: false, refusal: { code: 'UNCHANGED_RETRY' } });
    expect(provider.calls).toHaveLength(1);

    const corrected = { customer_id: 'cus_2', amount_cents: 1200 };
    const fixed = await run({ input: corrected });
    expect(fixed).toMatchObject({ kind: 'recorded', status: 'succeeded', attempt: 2 });
    expect(provider.calls[1].context.idempotencyKey).toBe('run_81/step_4');

    // Coming back with the corrected input later is the same step, replayed.
    expect(await run({ input: corrected })).toMatchObject({ kind: 'replayed', toolCalled: false });
    expect(provider.calls).toHaveLength(2);
  });

  it('the same operation_ref for another step is refused, the tool never called', async () => {
    await run();
    const reused = await run({ tool: 'send_email' });
    expect(reused).toMatchObject({ kind: 'refused', toolCalled: false, refusal: { code: 'OPERATION_REF_REUSED' } });
    const otherInput = await run({ input: { customer_id: 'cus_9', amount_cents: 1 } });
    expect(otherInput).toMatchObject({ kind: 'refused', refusal: { code: 'OPERATION_REF_REUSED' } });
    expect(provider.calls).toHaveLength(1);
  });

  it('rate limited: returns not_before for the scheduler; before it the tool is not called, after it it is', async () => {
    provider.then({ kind: 'status', status: 429, headers: { 'retry-after': '30' } });
    const first = await run();
    const expected = new Date(ledger.now().getTime() + 30_000).toISOString();
    expect(first).toMatchObject({
      status: 'retry_scheduled',
      directive: { next_action: 'wait_and_retry', not_before: expected },
      notBefore: expected,
    });

    const early = await run();
    expect(early).toMatchObject({
      kind: 'refused',
      toolCalled: false,
      refusal: { code: 'RETRY_NOT_BEFORE' },
      notBefore: expected,
    });
    expect(provider.calls).toHaveLength(1);

    ledger.advance(30_000);
    expect(await run()).toMatchObject({ kind: 'recorded', status: 'succeeded', attempt: 2 });
  });

  it('write socket timeout: unknown; no second write before the lookup; the lookup turns the step into success', async () => {
    provider.then({ kind: 'commit_then_reset' });
    const first = await run();
    expect(first).toMatchObject({
      kind: 'recorded',
      status: 'verifying',
      directive: { next_action: 'verify_operation' },
      envelope: { code: 'OUTCOME_UNKNOWN', commit_state: 'unknown' },
    });

    expect(await run()).toMatchObject({ kind: 'refused', toolCalled: false, refusal: { code: 'VERIFY_BEFORE_RETRY' } });
    expect(provider.calls).toHaveLength(1);

    const verified = await verify(client, { operationRef: step.operationRef }, provider.lookup, options());
    expect(verified).toMatchObject({
      kind: 'recorded',
      outcome: 'found_committed',
      status: 'succeeded',
      evidenceRef: 'inv_1',
    });
    expect(provider.invoices.size).toBe(1);
    expect(await dispatches()).toHaveLength(1);
  });

  it('not found: refused inside the consistency window, then one new attempt with the same key', async () => {
    provider.then({ kind: 'reset_before_commit' });
    // A reset with no code saying the request never left: unknown, like any break after send.
    expect(await run()).toMatchObject({ status: 'verifying' });

    const premature = await verify(client, step, provider.lookup, options());
    expect(premature).toMatchObject({
      kind: 'refused',
      outcome: 'not_found',
      refusal: { code: 'VERIFICATION_PREMATURE' },
    });
    expect(Date.parse(premature.notBefore!)).toBeGreaterThan(ledger.now().getTime());

    ledger.advance(WINDOW_MS);
    expect(await verify(client, step, provider.lookup, options())).toMatchObject({
      kind: 'recorded',
      status: 'retry_ready',
    });
    const retried = await run();
    expect(retried).toMatchObject({ kind: 'recorded', status: 'succeeded', attempt: 2 });
    expect(provider.calls.map((call) => call.context.idempotencyKey)).toEqual(['run_81/step_4', 'run_81/step_4']);
    expect(provider.invoices.size).toBe(1);
  });

  it('lookup unavailable: escalates, never guesses', async () => {
    provider.then({ kind: 'commit_then_reset' });
    await run();
    const failing = async () => {
      throw new Error('lookup endpoint down');
    };
    expect(await verify(client, step, failing, options())).toMatchObject({
      outcome: 'lookup_unavailable',
      status: 'escalated',
    });
    expect(await run()).toMatchObject({ kind: 'refused', toolCalled: false, refusal: { code: 'STEP_ESCALATED' } });
  });

  it('a lookup answer that is neither found (with evidence) nor not found is no answer', async () => {
    provider.then({ kind: 'commit_then_reset' });
    await run();
    const vague = async () => ({ found: true }) as never;
    expect(await verify(client, step, vague, options())).toMatchObject({
      outcome: 'lookup_unavailable',
      status: 'escalated',
    });
  });

  it('lost approval: awaiting_approval, and the tool is not invoked again', async () => {
    provider.then({ kind: 'status', status: 403 });
    expect(await run()).toMatchObject({ status: 'awaiting_approval', directive: { next_action: 'request_approval' } });
    expect(await run()).toMatchObject({ kind: 'refused', toolCalled: false, refusal: { code: 'APPROVAL_REQUIRED' } });
    expect(provider.calls).toHaveLength(1);

    await client.recordApproval(step.operationRef, { decision: 'granted', approver: 'ops@example.com' });
    expect(await run()).toMatchObject({ kind: 'recorded', status: 'succeeded', attempt: 2 });
  });

  it('repeated provider outage: bounded, then terminal escalation', async () => {
    provider.then(...Array.from({ length: 5 }, () => ({ kind: 'status' as const, status: 502 })));
    for (let attempt = 1; attempt <= 3; attempt++) {
      expect(await run()).toMatchObject({ kind: 'recorded', status: 'verifying', attempt });
      ledger.advance(WINDOW_MS);
      await verify(client, step, provider.lookup, options());
    }
    expect((await client.getOperation(step.operationRef)).status).toBe('escalated');
    expect(await run()).toMatchObject({ kind: 'refused', toolCalled: false, refusal: { code: 'ATTEMPTS_EXHAUSTED' } });
    expect(provider.calls).toHaveLength(3);
  });

  it('an envelope that breaks the rules is recorded as unknown (the tool did run), never as it came', async () => {
    const sloppy = async () => ({ ok: false, code: 'oops', message: 'try again' });
    const outcome = await executeWrite(client, step, sloppy, options());
    expect(outcome).toMatchObject({
      status: 'verifying',
      envelope: { code: 'TOOL_RESULT_INVALID', commit_state: 'unknown' },
    });
  });

  it('a read step: a failure after send is only a failed read, scheduled for later', async () => {
    provider.then({ kind: 'reset_before_commit' });
    const outcome = await run({ sideEffect: 'read', tool: 'get_invoice', operationRef: 'run_81/step_5' });
    expect(outcome).toMatchObject({
      status: 'retry_scheduled',
      envelope: { commit_state: 'not_committed', next_action: 'wait_and_retry' },
    });
  });

  it('the tool ran but the ledger could not take its envelope: OutcomeNotRecordedError, the attempt stays in flight', async () => {
    const flaky = new LedgerClient({ baseUrl: ledger.baseUrl, maxRetries: 1, sleep: async () => undefined });
    const callThenBreakLedger = async (input: InvoiceInput, context: Parameters<typeof provider.createInvoice>[1]) => {
      const envelope = await provider.createInvoice(input, context);
      ledger.inject({ kind: 'unavailable' }, { kind: 'unavailable' });
      return envelope;
    };
    const error = await executeWrite(flaky, step, callThenBreakLedger, options()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutcomeNotRecordedError);
    expect(error).toMatchObject({ operationRef: step.operationRef, attempt: 1, envelope: { ok: true } });
    expect((await client.getOperation(step.operationRef)).status).toBe('dispatched');
    expect(await run()).toMatchObject({ kind: 'refused', toolCalled: false, refusal: { code: 'ATTEMPT_IN_FLIGHT' } });
  });

  it('never calls the tool when the ledger cannot be reached to grant the dispatch', async () => {
    const address = ledger.baseUrl;
    await ledger.close();
    const offline = new LedgerClient({ baseUrl: address, maxRetries: 0 });
    await expect(executeWrite(offline, step, provider.createInvoice, options())).rejects.toMatchObject({
      code: 'LEDGER_UNREACHABLE',
    });
    expect(provider.calls).toHaveLength(0);
    ledger = await startLoopbackLedger();
  });

  it('inputHash is canonical: key order does not matter, values do', () => {
    expect(inputHash({ a: 1, b: [1, 2] })).toBe(inputHash({ b: [1, 2], a: 1 }));
    expect(inputHash({ a: 1 })).not.toBe(inputHash({ a: 2 }));
    expect(inputHash({ a: 1 })).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('a caller signal', () => {
  let ledger: LoopbackLedger;
  let client: LedgerClient;
  let provider: KeyedInvoiceProvider;
  const step: WriteStep<InvoiceInput> = {
    operationRef: 'run_90/step_1',
    runId: 'run_90',
    tool: 'create_invoice',
    input: { customer_id: 'cus_9', amount_cents: 900 },
    policy: { max_attempts: 3, consistency_window_ms: WINDOW_MS },
  };

  beforeEach(async () => {
    ledger = await startLoopbackLedger();
    client = new LedgerClient({ baseUrl: ledger.baseUrl, sleep: async () => undefined });
    provider = new KeyedInvoiceProvider(() => ledger.now());
  });
  afterEach(() => ledger.close());

  it('stops executeWrite before the gate: nothing is planned, nothing dispatched, the tool is not called', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(executeWrite(client, step, provider.createInvoice, { signal: controller.signal })).rejects.toThrow();
    expect(provider.calls).toHaveLength(0);
    expect(await ledger.events(step.operationRef)).toEqual([]);
  });

  it('is handed to the tool call, and the tool answer is recorded even when the signal fires meanwhile', async () => {
    const controller = new AbortController();
    const seen: Array<AbortSignal | undefined> = [];
    const outcome = await executeWrite(
      client,
      step,
      async (input, context) => {
        seen.push(context.signal);
        const envelope = await provider.createInvoice(input, context);
        controller.abort();
        return envelope;
      },
      { signal: controller.signal },
    );
    // The tool's signal follows the caller's (combined with the end of the call window).
    expect(seen).toHaveLength(1);
    expect(seen[0]!.aborted).toBe(true);
    expect(outcome).toMatchObject({ kind: 'recorded', status: 'succeeded', toolCalled: true });
  });

  it('stops verify before the lookup, and an abort during the lookup is not recorded as lookup_unavailable', async () => {
    await executeWrite(client, step, async (input, context) => {
      await provider.createInvoice(input, context);
      throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    });
    const controller = new AbortController();
    const lookup = jest.fn(async (_ref: string, context: { signal?: AbortSignal }) => {
      controller.abort();
      context.signal?.throwIfAborted();
      return { found: false as const };
    });
    await expect(
      verify(client, { operationRef: step.operationRef, tool: step.tool }, lookup, { signal: controller.signal }),
    ).rejects.toThrow();
    expect(lookup).toHaveBeenCalledTimes(1);
    const verifications = (await ledger.events(step.operationRef)).filter(
      (event) => event.type === 'VerificationRecorded',
    );
    expect(verifications).toEqual([]);
  });
});
