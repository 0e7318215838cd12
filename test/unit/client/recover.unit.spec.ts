import { executeWrite, inputHash, LedgerClient, type Lookup, recover } from '@recovery-ledger/client';
import { KeyedInvoiceProvider, type InvoiceInput } from './support/keyed-provider';
import { startLoopbackLedger, type LoopbackLedger } from './support/loopback-ledger';

const WINDOW_MS = 1000;
const INPUT: InvoiceInput = { customer_id: 'cus_1', amount_cents: 500 };

describe('recover', () => {
  let ledger: LoopbackLedger;
  let client: LedgerClient;
  let provider: KeyedInvoiceProvider;
  const options = () => ({ now: () => ledger.now() });

  beforeEach(async () => {
    ledger = await startLoopbackLedger();
    client = new LedgerClient({ baseUrl: ledger.baseUrl, sleep: async () => undefined });
    provider = new KeyedInvoiceProvider(() => ledger.now());
  });
  afterEach(() => ledger.close());

  /** A worker that died right after the ledger granted the dispatch, before or after the provider ran. */
  async function crashAfterDispatch(ref: string, tool = 'create_invoice', providerRan = true): Promise<void> {
    await client.planStep(ref, {
      run_id: 'run_7',
      tool,
      side_effect: 'write',
      input_hash: inputHash(INPUT),
      policy: { consistency_window_ms: WINDOW_MS },
    });
    await client.dispatchAttempt(ref, { attempt: 1, input_hash: inputHash(INPUT) });
    if (providerRan) {
      await provider.createInvoice(INPUT, { operationRef: ref, idempotencyKey: ref, attempt: 1, sideEffect: 'write' });
    }
  }

  it('verifies each in-flight operation by its own operation_ref and records the outcome', async () => {
    await crashAfterDispatch('run_7/step_1');
    await crashAfterDispatch('run_7/step_2');
    const asked: string[] = [];
    const lookup: Lookup = (ref, context) => {
      asked.push(ref);
      return provider.lookup(ref, context);
    };

    const report = await recover(client, { create_invoice: lookup }, options());
    expect(asked).toEqual(['run_7/step_1', 'run_7/step_2']);
    expect(report.entries).toEqual([
      expect.objectContaining({
        operationRef: 'run_7/step_1',
        result: 'verified',
        outcome: 'found_committed',
        status: 'succeeded',
      }),
      expect.objectContaining({
        operationRef: 'run_7/step_2',
        result: 'verified',
        outcome: 'found_committed',
        status: 'succeeded',
      }),
    ]);
    expect(report.missingLookups).toEqual([]);

    // The worker's normal path afterwards: the original success, no second invoice.
    const again = await executeWrite(
      client,
      {
        operationRef: 'run_7/step_1',
        runId: 'run_7',
        tool: 'create_invoice',
        input: INPUT,
        policy: { consistency_window_ms: WINDOW_MS },
      },
      provider.createInvoice,
      options(),
    );
    expect(again).toMatchObject({ kind: 'replayed', toolCalled: false });
    expect(provider.invoices.size).toBe(2);
  });

  it('died before the provider ran: not_found is premature inside the window, then the same key runs again', async () => {
    await crashAfterDispatch('run_7/step_3', 'create_invoice', false);
    const early = await recover(client, { create_invoice: provider.lookup }, options());
    expect(early.entries[0]).toMatchObject({ result: 'refused', outcome: 'not_found', code: 'VERIFICATION_PREMATURE' });
    expect(early.nextCheckAt).toBe(early.entries[0].notBefore);

    // The dead dispatcher declared no call window: its attempt may reach the provider until the
    // plan's dispatch timeout, and not_found is conclusive a window after that (docs/contract.md §4.5).
    expect(Date.parse(early.entries[0].notBefore ?? '')).toBe(
      Date.parse(ledger.now().toISOString()) + 60_000 + WINDOW_MS,
    );
    ledger.advance(60_000 + WINDOW_MS);
    const late = await recover(client, { create_invoice: provider.lookup }, options());
    expect(late.entries[0]).toMatchObject({ result: 'verified', outcome: 'not_found', status: 'retry_ready' });

    const retried = await executeWrite(
      client,
      {
        operationRef: 'run_7/step_3',
        runId: 'run_7',
        tool: 'create_invoice',
        input: INPUT,
        policy: { consistency_window_ms: WINDOW_MS },
      },
      provider.createInvoice,
      options(),
    );
    expect(retried).toMatchObject({ kind: 'recorded', status: 'succeeded', attempt: 2 });
    expect(provider.calls.map((call) => call.context.idempotencyKey)).toEqual(['run_7/step_3']);
    expect(await recover(client, { create_invoice: provider.lookup }, options())).toEqual({
      entries: [],
      missingLookups: [],
    });
  });

  it('reports a tool without a registered lookup, and records nothing for it', async () => {
    await crashAfterDispatch('run_7/step_4', 'send_email');
    const before = (await ledger.events('run_7/step_4')).length;
    const report = await recover(client, { create_invoice: provider.lookup }, options());
    expect(report.entries).toEqual([
      expect.objectContaining({ operationRef: 'run_7/step_4', tool: 'send_email', result: 'no_lookup' }),
    ]);
    expect(report.missingLookups).toEqual(['send_email']);
    expect(await ledger.events('run_7/step_4')).toHaveLength(before);
  });

  it('also verifies operations whose envelope said the outcome is unknown', async () => {
    provider.then({ kind: 'commit_then_reset' });
    const outcome = await executeWrite(
      client,
      { operationRef: 'run_7/step_5', runId: 'run_7', tool: 'create_invoice', input: INPUT },
      provider.createInvoice,
      options(),
    );
    expect(outcome.status).toBe('verifying');
    const report = await recover(client, { create_invoice: provider.lookup }, options());
    expect(report.entries[0]).toMatchObject({
      listedStatus: 'verifying',
      outcome: 'found_committed',
      status: 'succeeded',
    });
  });

  it('a lookup that throws escalates the operation: never guess', async () => {
    await crashAfterDispatch('run_7/step_6');
    const down: Lookup = async () => {
      throw new Error('503 from the lookup endpoint');
    };
    const report = await recover(client, { create_invoice: down }, options());
    expect(report.entries[0]).toMatchObject({ outcome: 'lookup_unavailable', status: 'escalated' });
  });

  it('leaves alone operations younger than olderThanMs', async () => {
    await crashAfterDispatch('run_7/step_7');
    expect(
      (await recover(client, { create_invoice: provider.lookup }, { ...options(), olderThanMs: 60_000 })).entries,
    ).toEqual([]);
    ledger.advance(60_000);
    expect(
      (await recover(client, { create_invoice: provider.lookup }, { ...options(), olderThanMs: 60_000 })).entries,
    ).toHaveLength(1);
  });

  it('never invents a key: every verification is recorded on a listed operation, nothing is dispatched', async () => {
    for (const step of [1, 2, 3, 4, 5])
      await crashAfterDispatch(`run_8/step_${step}`, 'create_invoice', step % 2 === 0);
    ledger.advance(WINDOW_MS);
    const requestsBefore = ledger.requests.length;
    await recover(client, { create_invoice: provider.lookup }, options());
    const submits = ledger.requests.slice(requestsBefore).filter((request) => request.method === 'POST');
    expect(submits.map((request) => decodeURIComponent(request.url))).toEqual(
      [1, 2, 3, 4, 5].map((step) => `/v1/operations/run_8/step_${step}/events`),
    );
    expect(submits.every((request) => request.body.events[0].type === 'VerificationRecorded')).toBe(true);
    expect(provider.calls).toHaveLength(2);
  });
});
