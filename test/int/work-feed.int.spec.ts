/**
 * The work feed where no process must die, stand still or run twice: the whole service (createApp,
 * its SQLite files, the projection thread) on a loopback port of the test's own process
 * (test/support/ledger-in-process.ts), the example invoice provider on another, and the SDK's
 * LedgerWorker over real HTTP, one describe block per subject. What needs a process of its own (a
 * worker killed with SIGKILL or stopped with SIGSTOP, two service instances on one store,
 * libfaketime clocks) is in work-feed.e2e.spec.ts (README.md, "Tests by tier").
 */

import { randomUUID } from 'node:crypto';
import { executeWrite, LedgerClient, recover, verify } from '@recovery-ledger/client';
import { VERIFICATION_TOOL } from '../../examples/invoice-tools';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';
import {
  CREATE_INVOICE,
  INVOICE,
  runWorker,
  startInvoiceStep,
  startProviderInProcess,
  waitForStatus,
  waitUntil,
  type Provider,
} from '../support/work-feed-harness';
import { committed, unknownOutcome } from '../support/cli-harness';
import { submitFact } from '../support/http';

describe('the contract table through LedgerWorker', () => {
  /**
   * The article's contract table driven through the SDK's LedgerWorker alone, over real HTTP, with
   * the example provider on loopback (idempotency off, so a duplicate write would show in its own
   * count). The tests only start steps, inject faults and, for the approval row, approve: the
   * ledger's work feed decides what is due and the worker does it.
   */

  const ENV = { LEDGER_RATE_LIMIT_PER_MINUTE: '1000000' };
  let ledger: LedgerProcess;
  let provider: Provider;
  let client: LedgerClient;
  const ref = (label: string) => `run_feed/${label}-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    provider = await startProviderInProcess({ idempotency: false });
    ledger = await startLedger({ env: ENV });
    client = new LedgerClient({ baseUrl: ledger.baseUrl });
  });
  afterAll(async () => {
    await Promise.all([ledger?.stop(), provider?.stop()]);
    ledger?.cleanup();
  });

  const start = (operationRef: string, policy: Record<string, number | string> = {}) =>
    startInvoiceStep(client, operationRef, 'run_feed', { consistency_window_ms: 0, ...policy });

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
      const verification = (evidence.entries as any[]).find(
        (entry: any) => entry.type === 'VerificationRecorded',
      ) as any;
      expect(verification.worker).toMatchObject({ holder: 'w-timeout', current: true });
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
});

describe('the round trips a step costs', () => {
  /**
   * The round trips a step costs through the work feed, on the service over real HTTP: the
   * fact that ends a step under its lease gives the lease back in the same request (docs/contract.md
   * §9, "A lease ends with its step"), so the SDK's LedgerWorker sends no release for it; a fact that
   * leaves work to do under the lease (an outcome to verify) keeps it held.
   */

  let ledger: LedgerProcess;
  let provider: Provider;
  let client: LedgerClient;
  const ref = (label: string) => `run_trips/${label}-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    provider = await startProviderInProcess();
    ledger = await startLedger({ env: { LEDGER_RATE_LIMIT_PER_MINUTE: '1000000' } });
    client = new LedgerClient({ baseUrl: ledger.baseUrl });
  });
  afterAll(async () => {
    await Promise.all([ledger?.stop(), provider?.stop()]);
    ledger?.cleanup();
  });

  const plan = (operationRef: string) =>
    startInvoiceStep(client, operationRef, 'run_trips', { consistency_window_ms: 0 });

  /** Takes `operationRef` from the feed as `worker`; answers its lease id and the attempt to dispatch. */
  async function take(
    operationRef: string,
    worker: string,
  ): Promise<{ lease: string; attempt: number; inputHash: string }> {
    const answer = await client.work({ worker, tools: [CREATE_INVOICE], limit: 100, waitMs: 5_000 });
    const item = answer.items.find((candidate) => candidate.operation_ref === operationRef);
    if (!item) throw new Error(`${operationRef} was not handed to ${worker}: ${JSON.stringify(answer.items)}`);
    return { lease: item.lease.id, attempt: item.attempt, inputHash: item.input_hash };
  }

  describe('a lease ends with its step', () => {
    it('the envelope that ends the step under its lease answers lease_released, and the step is held by no one', async () => {
      const operationRef = ref('ended');
      const { position } = await plan(operationRef);
      await client.listRecovery({ waitForPosition: position });
      const { lease, attempt, inputHash } = await take(operationRef, 'w-ends');
      const underLease = { 'ledger-lease': lease };
      const dispatched = await submitFact(
        ledger.baseUrl,
        operationRef,
        'AttemptDispatched',
        { attempt, input_hash: inputHash },
        underLease,
      );
      expect(dispatched.status).toBe(200);
      // A fact that does not end the step leaves the lease where it is.
      expect(dispatched.body.lease_released).toBeUndefined();
      expect((await client.getLease(operationRef)).held).toBe(true);

      const ended = await submitFact(
        ledger.baseUrl,
        operationRef,
        'EnvelopeRecorded',
        { attempt, envelope: committed(operationRef, 'inv_trips') },
        underLease,
      );
      expect(ended.status).toBe(200);
      expect(ended.body.state.status).toBe('succeeded');
      expect(ended.body.lease_released).toBe(true);
      expect(await client.getLease(operationRef)).toEqual({ held: false });
      // The worker's own release, had it sent one, finds nothing left to give back.
      expect(await client.releaseLease(operationRef, lease)).toEqual({ released: false });
    });

    it('an outcome left to verify keeps the lease with the worker that must verify it', async () => {
      const operationRef = ref('unknown');
      const { position } = await plan(operationRef);
      await client.listRecovery({ waitForPosition: position });
      const { lease, attempt, inputHash } = await take(operationRef, 'w-verifies');
      const underLease = { 'ledger-lease': lease };
      expect(
        (
          await submitFact(
            ledger.baseUrl,
            operationRef,
            'AttemptDispatched',
            { attempt, input_hash: inputHash },
            underLease,
          )
        ).status,
      ).toBe(200);
      const unknown = await submitFact(
        ledger.baseUrl,
        operationRef,
        'EnvelopeRecorded',
        { attempt, envelope: unknownOutcome(operationRef) },
        underLease,
      );
      expect(unknown.status).toBe(200);
      expect(unknown.body.state.status).toBe('verifying');
      expect(unknown.body.lease_released).toBeUndefined();
      expect(await client.getLease(operationRef)).toMatchObject({ held: true, holder: 'w-verifies' });
    });

    it('a fact that ends the step under a lease the sender does not hold releases nothing', async () => {
      const operationRef = ref('stale');
      const { position } = await plan(operationRef);
      await client.listRecovery({ waitForPosition: position });
      const { lease, attempt, inputHash } = await take(operationRef, 'w-first');
      expect(await client.releaseLease(operationRef, lease)).toEqual({ released: true });
      const { lease: second } = await take(operationRef, 'w-second');
      // The first worker's lease is over; its facts are still judged by the gate, but they give back
      // nothing: the second worker's lease stays.
      const stale = { 'ledger-lease': lease };
      expect(
        (await submitFact(ledger.baseUrl, operationRef, 'AttemptDispatched', { attempt, input_hash: inputHash }, stale))
          .status,
      ).toBe(200);
      const ended = await submitFact(
        ledger.baseUrl,
        operationRef,
        'EnvelopeRecorded',
        { attempt, envelope: committed(operationRef, 'inv_stale') },
        stale,
      );
      expect(ended.status).toBe(200);
      expect(ended.body.lease_released).toBeUndefined();
      expect(await client.getLease(operationRef)).toMatchObject({ held: true, holder: 'w-second' });
      expect(await client.releaseLease(operationRef, second)).toEqual({ released: true });
    });
  });

  describe('LedgerWorker', () => {
    it('sends no release for steps their envelopes ended: two submits and its polls per step, nothing else', async () => {
      const sent: string[] = [];
      const counting = new LedgerClient({
        baseUrl: ledger.baseUrl,
        fetch: (input, init) => {
          const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
          sent.push(`${init?.method ?? 'GET'} ${url.pathname}`);
          return fetch(input, init);
        },
      });
      const refs = [ref('w1'), ref('w2'), ref('w3')];
      const worker = runWorker(counting, provider.url, { id: 'w-counted', concurrency: 1 });
      try {
        for (const operationRef of refs) {
          await plan(operationRef);
          await waitForStatus(client, operationRef, ['succeeded']);
        }
      } finally {
        await worker.stop();
      }
      const about = (operationRef: string) => sent.filter((line) => line.includes(encodeURIComponent(operationRef)));
      for (const operationRef of refs) {
        // AttemptDispatched, then EnvelopeRecorded: the envelope's answer gave the lease back.
        expect(about(operationRef)).toEqual([
          `POST /v1/operations/${encodeURIComponent(operationRef)}/events`,
          `POST /v1/operations/${encodeURIComponent(operationRef)}/events`,
        ]);
        expect(await client.getLease(operationRef)).toEqual({ held: false });
      }
      expect(sent.filter((line) => !line.startsWith('GET /v1/work') && !line.includes('/events'))).toEqual([]);
    });
  });
});
