/**
 * The article's contract table driven through the SDK's LedgerWorker alone, over real HTTP, with
 * the example provider as a real process (idempotency off, so a duplicate write would show in its
 * own count). The tests only start steps, inject faults and, for the approval row, approve: the
 * ledger's work feed decides what is due and the worker does it.
 */
import { randomUUID } from 'node:crypto';
import { executeWrite, LedgerClient, recover, verify } from '@recovery-ledger/client';
import { VERIFICATION_TOOL } from '../../examples/invoice-tools';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import {
  CREATE_INVOICE,
  INVOICE,
  runWorker,
  startProviderProcess,
  startWorkerProcess,
  waitForStatus,
  waitUntil,
  type ProviderProcess,
} from '../support/work-feed-harness';

jest.setTimeout(90_000);

const ENV = { LEDGER_RATE_LIMIT_PER_MINUTE: '1000000' };
let ledger: LedgerProcess;
let provider: ProviderProcess;
let client: LedgerClient;
const ref = (label: string) => `run_feed/${label}-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  provider = await startProviderProcess(['--no-idempotency']);
  ledger = await startLedger({ env: ENV });
  client = new LedgerClient({ baseUrl: ledger.baseUrl });
});
afterAll(async () => {
  await Promise.all([ledger?.stop(), provider?.stop()]);
  ledger?.cleanup();
});

const start = (operationRef: string, policy: Record<string, number | string> = {}) =>
  client.startStep({
    operationRef,
    runId: 'run_feed',
    tool: CREATE_INVOICE,
    input: INVOICE,
    policy: { verification_tool: VERIFICATION_TOOL, consistency_window_ms: 0, ...policy },
  });

const eventsOf = async (operationRef: string) => (await client.getEvents(operationRef)).events;

describe('the contract table through the worker alone', () => {
  it('a rate limit is retried only after not_before (and the jitter the ledger adds)', async () => {
    const operationRef = ref('rate');
    await provider.inject({ operation_ref: operationRef, fault: { kind: 'rate-limit', retry_after_s: 1 } });
    const worker = runWorker(client, provider.url, { id: 'w-rate' });
    try {
      await start(operationRef);
      await waitForStatus(client, operationRef, ['succeeded']);
    } finally {
      await worker.stop();
    }
    const events = await eventsOf(operationRef);
    const dispatches = events.filter((event) => event.type === 'AttemptDispatched');
    expect(dispatches).toHaveLength(2);
    const scheduled = events.find(
      (event) => event.type === 'TransitionRecorded' && (event.data as any).to === 'retry_scheduled',
    ) as any;
    const notBefore = Date.parse(scheduled!.data.directive.not_before);
    expect(Date.parse(dispatches[1].recorded_at)).toBeGreaterThanOrEqual(notBefore);
    // No early dispatch was even tried: the worker never got the item before it was due.
    expect(events.filter((event) => event.type === 'DispatchRefused')).toHaveLength(0);
    expect((await provider.stats()).created[operationRef]).toBe(1);
  });

  it('a timeout after the provider committed is verified as success, with exactly one create', async () => {
    const operationRef = ref('timeout');
    await provider.inject({ operation_ref: operationRef, fault: { kind: 'accept-then-timeout' } });
    const worker = runWorker(client, provider.url, { id: 'w-timeout', toolTimeoutMs: 500 });
    try {
      await start(operationRef);
      await waitForStatus(client, operationRef, ['succeeded']);
    } finally {
      await worker.stop();
    }
    const stats = await provider.stats();
    expect(stats.created[operationRef]).toBe(1);
    expect(stats.create_requests[operationRef]).toBe(1);
    const evidence = await client.getEvidence(operationRef, {
      waitForPosition: (await client.getEvents(operationRef)).events.at(-1)!.position,
    });
    expect(evidence.verdict).toMatchObject({ status: 'succeeded', proven_by: 'verification' });
    // Who verified what: the fact carries the worker that held the item.
    const verification = (evidence.entries as any[]).find((entry: any) => entry.type === 'VerificationRecorded') as any;
    expect(verification.worker).toMatchObject({ holder: 'w-timeout', current: true });
  });

  it('a worker killed with SIGKILL mid-call: another takes the step after the dispatch timeout and verifies it by the same ref', async () => {
    const operationRef = ref('killed');
    await provider.inject({ operation_ref: operationRef, fault: { kind: 'accept-then-timeout' } });
    const doomed = startWorkerProcess(ledger.baseUrl, provider.url, [
      '--worker-id',
      'w-doomed',
      '--lease-ms',
      '1000',
      '--tool-timeout-ms',
      '60000',
    ]);
    await start(operationRef, { dispatch_timeout_ms: 1000 });
    // The provider has the create (committed, never answered): the worker is mid-call. Kill it.
    await waitUntil('the create to reach the provider', async () =>
      (await provider.stats()).create_requests[operationRef] ? true : undefined,
    );
    await doomed.kill('SIGKILL');
    expect((await client.getOperation(operationRef)).status).toBe('dispatched');

    const rescuer = runWorker(client, provider.url, { id: 'w-rescuer' });
    try {
      await waitForStatus(client, operationRef, ['succeeded']);
    } finally {
      await rescuer.stop();
    }
    const events = await eventsOf(operationRef);
    expect(events.filter((event) => event.type === 'AttemptDispatched')).toHaveLength(1);
    const verification = events.find((event) => event.type === 'VerificationRecorded')!;
    expect(verification.data).toMatchObject({ outcome: 'found_committed' });
    const dispatched = events.find((event) => event.type === 'TransitionRecorded' && event.data.to === 'dispatched')!;
    // Not before the dispatch timeout, by the ledger's clock.
    expect(Date.parse(verification.recorded_at) - Date.parse(dispatched.recorded_at)).toBeGreaterThanOrEqual(1000);
    const evidence = await client.getEvidence(operationRef, { waitForPosition: events.at(-1)!.position });
    const byWorker = (evidence.entries as any[])
      .filter((entry: any) => entry.worker)
      .map((entry: any) => [entry.type, entry.worker.holder, entry.worker.took_over_from]);
    expect(byWorker).toEqual([
      ['AttemptDispatched', 'w-doomed', undefined],
      ['VerificationRecorded', 'w-rescuer', 'w-doomed'],
    ]);
    expect((await provider.stats()).created[operationRef]).toBe(1);
    const metrics = await (await fetch(`${ledger.baseUrl}/metrics`)).text();
    expect(metrics).toMatch(/ledger_work_lease_expiries_total\{tool="create_invoice"\} [1-9]/);
    expect(metrics).toMatch(/ledger_work_lease_handovers_total\{tool="create_invoice"\} [1-9]/);
  });

  it('two workers on one feed, each on its own service instance sharing the store, never execute one attempt twice', async () => {
    const second = await startLedger({ env: { ...ENV, LEDGER_EVENTS_FILE: `${ledger.dataDir}/events.sqlite` } });
    const secondClient = new LedgerClient({ baseUrl: second.baseUrl });
    const refs = Array.from({ length: 40 }, (_, index) => ref(`pair-${index}`));
    const a = runWorker(client, provider.url, { id: 'w-a', concurrency: 8 });
    const b = runWorker(secondClient, provider.url, { id: 'w-b', concurrency: 8 });
    try {
      await Promise.all(refs.map((operationRef) => start(operationRef)));
      for (const operationRef of refs) await waitForStatus(client, operationRef, ['succeeded']);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
      await second.stop();
      second.cleanup();
    }
    const stats = await provider.stats();
    for (const operationRef of refs) {
      expect(stats.create_requests[operationRef]).toBe(1);
      expect(stats.created[operationRef]).toBe(1);
      const events = await eventsOf(operationRef);
      expect(events.filter((event) => event.type === 'AttemptDispatched')).toHaveLength(1);
      expect(events.filter((event) => event.type === 'DispatchRefused')).toHaveLength(0);
    }
    // Both instances handed out work.
    const items = (worker: { events: Array<{ type: string }> }) =>
      worker.events.filter((event) => event.type === 'item').length;
    expect(items(a) + items(b)).toBeGreaterThanOrEqual(40);
    expect(items(a)).toBeGreaterThan(0);
    expect(items(b)).toBeGreaterThan(0);
  });

  it('a repeated outage escalates after the bound', async () => {
    const operationRef = ref('outage');
    await provider.inject({ operation_ref: operationRef, times: 10, fault: { kind: 'bad-gateway' } });
    const worker = runWorker(client, provider.url, { id: 'w-outage' });
    let final;
    try {
      await start(operationRef, { max_attempts: 5, max_consecutive_dependency_failures: 2 });
      final = await waitForStatus(client, operationRef, ['escalated']);
    } finally {
      await worker.stop();
    }
    expect(final.reason).toMatch(/EXHAUSTED/);
    const events = await eventsOf(operationRef);
    expect(events.filter((event) => event.type === 'AttemptDispatched')).toHaveLength(2);
    expect((await provider.stats()).created[operationRef]).toBeUndefined();
  });

  it('an approval-gated step waits until approved, then the worker finishes it', async () => {
    const operationRef = ref('approval');
    await provider.inject({ operation_ref: operationRef, fault: { kind: 'forbidden' } });
    const worker = runWorker(client, provider.url, { id: 'w-approval' });
    try {
      await start(operationRef);
      await waitForStatus(client, operationRef, ['awaiting_approval']);
      // The feed does not hand it out while it waits: nothing more reaches the provider.
      await new Promise((r) => setTimeout(r, 1500));
      expect((await provider.stats()).create_requests[operationRef]).toBe(1);
      expect((await client.getOperation(operationRef)).status).toBe('awaiting_approval');
      await client.recordApproval(operationRef, { decision: 'granted', approver: 'ops@example.com' });
      await waitForStatus(client, operationRef, ['succeeded']);
    } finally {
      await worker.stop();
    }
    expect((await provider.stats()).created[operationRef]).toBe(1);
  });
});

describe('stopping a worker', () => {
  it('lets the call in hand finish and records it before run() resolves; takes nothing new', async () => {
    const operationRef = ref('stop');
    await provider.inject({ operation_ref: operationRef, fault: { kind: 'slow', delay_ms: 1500 } });
    const worker = runWorker(client, provider.url, { id: 'w-stop', toolTimeoutMs: 5000 });
    await start(operationRef);
    await waitUntil('the create to reach the provider', async () =>
      (await provider.stats()).create_requests[operationRef] ? true : undefined,
    );
    const report = await worker.stop();
    // run() resolved only after the slow call answered and its envelope was recorded.
    expect((await client.getOperation(operationRef)).status).toBe('succeeded');
    expect(report).toMatchObject({ dispatched: 1, succeeded: 1, errors: 0, leftForVerification: 0 });
    const later = ref('after-stop');
    await start(later);
    await new Promise((r) => setTimeout(r, 800));
    expect((await client.getOperation(later)).status).toBe('planned');
  });

  it('executeWrite, verify and recover take an AbortSignal: aborted before the gate, nothing is dispatched', async () => {
    const operationRef = ref('aborted');
    const stop = new AbortController();
    stop.abort();
    await expect(
      executeWrite(
        client,
        { operationRef, runId: 'run_feed', tool: CREATE_INVOICE, input: INVOICE },
        async () => {
          throw new Error('the tool must not be called');
        },
        { signal: stop.signal },
      ),
    ).rejects.toMatchObject({ name: 'AbortError' });
    await expect(client.getOperation(operationRef)).rejects.toMatchObject({ code: 'OPERATION_NOT_FOUND' });
    await expect(
      verify(client, { operationRef }, async () => ({ found: false }), { signal: stop.signal }),
    ).rejects.toMatchObject({ name: 'AbortError' });
    await expect(recover(client, {}, { signal: stop.signal })).rejects.toMatchObject({ name: 'AbortError' });
  });
});

describe('the feed over HTTP', () => {
  it('refuses a bad query with a typed 400 and a renewal of a lease it does not hold with 409 LEASE_LOST', async () => {
    const badWorker = await fetch(
      `${ledger.baseUrl}/v1/work?tool=create_invoice&worker=${encodeURIComponent('two words')}`,
    );
    expect(badWorker.status).toBe(400);
    expect(await badWorker.json()).toMatchObject({ code: 'BAD_REQUEST', field: 'worker' });
    const badLimit = await fetch(`${ledger.baseUrl}/v1/work?worker=w&limit=0`);
    expect(badLimit.status).toBe(400);
    const lost = await fetch(`${ledger.baseUrl}/v1/operations/nothing/lease/renew`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ lease_id: randomUUID() }),
    });
    expect(lost.status).toBe(409);
    expect(await lost.json()).toMatchObject({ code: 'LEASE_LOST' });
    const badBody = await fetch(`${ledger.baseUrl}/v1/operations/nothing/lease/release`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ lease_id: 'x' }),
    });
    expect(badBody.status).toBe(400);
  });

  it('hands one due item to one worker, with its directive, attempt, input and lease', async () => {
    const operationRef = ref('shape');
    const planned = await start(operationRef);
    await client.listRecovery({ waitForPosition: planned.position });
    const metrics = await (await fetch(`${ledger.baseUrl}/metrics`)).text();
    expect(metrics).toMatch(/ledger_work_feed_depth\{tool="create_invoice"\} [1-9]/);
    expect(metrics).toMatch(/ledger_work_feed_oldest_due_seconds\{tool="create_invoice"\} /);
    const [first, second] = await Promise.all([
      client.work({ worker: 'w-one', tools: [CREATE_INVOICE], limit: 100, waitMs: 0 }),
      client.work({ worker: 'w-two', tools: [CREATE_INVOICE], limit: 100, waitMs: 0 }),
    ]);
    const mine = [...first.items, ...second.items].filter((item) => item.operation_ref === operationRef);
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({
      kind: 'dispatch',
      status: 'planned',
      attempt: 1,
      input: INVOICE,
      verification_tool: VERIFICATION_TOOL,
      directive: { next_action: 'dispatch' },
      lease: { holder: expect.stringMatching(/^w-(one|two)$/) },
    });
    expect(mine[0].policy).toMatchObject({ dispatch_timeout_ms: 60_000 });
    const release = await client.releaseLease(operationRef, mine[0].lease.id);
    expect(release).toEqual({ released: true });
    const again = await client.work({ worker: 'w-three', tools: [CREATE_INVOICE], limit: 100, waitMs: 2000 });
    expect(again.items.find((item) => item.operation_ref === operationRef)?.lease.holder).toBe('w-three');
  });

  it('refuses a plan whose input does not hash to its input_hash', async () => {
    await expect(
      client.planStep(ref('bad-input'), {
        run_id: 'r',
        tool: CREATE_INVOICE,
        side_effect: 'write',
        input_hash: 'abc',
        input: INVOICE,
      }),
    ).rejects.toMatchObject({ code: 'BAD_REQUEST', field: 'events[0].data.input_hash' });
  });
});
