/**
 * The work feed where a test needs processes of their own (workers killed with SIGKILL or stopped
 * with SIGSTOP, several service instances on one store, one under libfaketime), one describe block
 * per subject; the 1,000-step drain is its own file (work-feed-drain.e2e.spec.ts) for its own
 * timeout, and what needs no process boundary runs in process (test/int/work-feed.int.spec.ts).
 * Each block keeps its own header, constants and hooks.
 */

import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { canonicalJson } from '@recovery-ledger/core';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { eventStoreDbStore } from '../support/store-setup';
import { until } from '../support/until';
import { LedgerClient, LedgerWorker, type WorkerEvent } from '@recovery-ledger/client';
import { VERIFICATION_TOOL, invoiceTools } from '../../examples/invoice-tools';
import {
  CREATE_INVOICE,
  INVOICE,
  runWorker,
  startInvoiceStep,
  startProviderProcess,
  startWorkerProcess,
  waitForStatus,
  waitUntil,
  type ProviderProcess,
} from '../support/work-feed-harness';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

// Jest takes one default timeout per file, read before the first test: the longest of the former
// files' (90 s, 90 s, 120 s, 120 s, 60 s), so no block's hooks or tests get less time than before.
jest.setTimeout(120_000);

describe('two instances, one clock an hour ahead', () => {
  /**
   * Two service processes on one SQLite file, the second started under Debian's libfaketime with its
   * wall clock an hour ahead (the monotonic clock left alone, as after a real `date -s` or a host
   * suspend between the two starts). A worker holds and renews a lease through the first instance;
   * the second must not hand that item to another worker while the lease is renewed, because both
   * compute ledger time from the one base the store keeps for this boot (docs/reliability.md,
   * "Instances agree on time"). Fresh items are still handed out by both, and once the worker stops
   * renewing the item is taken over in its time.
   *
   * Then two processes on one EventStoreDB (the protocol double) given different boot ids, as on two
   * hosts, the second an hour ahead: they cannot share a base, so their heartbeats show the skew, both
   * report it, and neither hands an expired lease of another holder over while fresh work still goes
   * out. (One test machine has one monotonic clock: two real hosts are stood in for, not shown.)
   * Last, attempt 1's window judged by an instance on another base ahead of the one that granted the
   * attempt, by 0.9 s (within the 1 s bound), 2 s and an hour (beyond it): the instance ahead never
   * takes a not_found inside the window, so never grants attempt 2 early; within the bound it answers
   * VERIFICATION_PREMATURE until the window has passed by the clock that started it; beyond the bound
   * VERIFICATION_PREMATURE while its own clock is inside the window, then 503 CLOCK_SKEW_UNBOUNDED
   * with Retry-After (docs/reliability.md, "Windows across instances").
   * Where libfaketime is not installed this suite says so and skips; CI sets
   * LEDGER_REQUIRE_FAKETIME=1, so there it cannot be skipped.
   */
  const LIBFAKETIME = [
    '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1',
    '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1',
  ].find((file) => existsSync(file));
  if (!LIBFAKETIME) {
    if (process.env.LEDGER_REQUIRE_FAKETIME === '1')
      throw new Error('LEDGER_REQUIRE_FAKETIME=1 but libfaketime is not installed (apt-get install faketime)');
    console.log('instance-clock tests skipped: libfaketime is not installed (apt-get install faketime to run them)');
  }
  const describeWithFaketime = LIBFAKETIME ? describe : describe.skip;

  const ENV = { LEDGER_RATE_LIMIT_PER_MINUTE: '1000000' };
  const LEASE_MS = 3_000;
  const INPUT = { customer_id: 'cus_clock', amount_cents: 1250, currency: 'EUR' };

  interface Answer<T = any> {
    status: number;
    body: T;
    retryAfter: string | null;
  }

  async function call<T = any>(
    ledger: LedgerProcess,
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<Answer<T>> {
    const response = await fetch(`${ledger.baseUrl}${path}`, {
      method,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return {
      status: response.status,
      body: (await response.json()) as T,
      retryAfter: response.headers.get('retry-after'),
    };
  }

  const path = (ref: string) => `/v1/operations/${encodeURIComponent(ref)}`;

  async function plan(ledger: LedgerProcess, ref: string): Promise<void> {
    const data = {
      run_id: 'run_clocks',
      tool: 'create_invoice',
      side_effect: 'write',
      input_hash: createHash('sha256').update(canonicalJson(INPUT)).digest('hex'),
      input: INPUT,
      // Due for verification 1 s after its dispatch: only the lease keeps it from another worker.
      policy: { dispatch_timeout_ms: 1_000, consistency_window_ms: 0 },
    };
    const answer = await call(ledger, 'POST', `${path(ref)}/events`, {
      events: [{ event_id: randomUUID(), type: 'StepPlanned', data }],
    });
    expect(answer.status).toBe(200);
  }

  type Item = { operation_ref: string; kind: string; lease: { id: string; holder: string; took_over_from?: string } };

  async function poll(ledger: LedgerProcess, worker: string, waitMs: number): Promise<Item[]> {
    const answer = await call<{ items: Item[] }>(
      ledger,
      'GET',
      `/v1/work?worker=${worker}&limit=100&wait_ms=${waitMs}&lease_ms=${LEASE_MS}`,
    );
    expect(answer.status).toBe(200);
    return answer.body.items;
  }

  describeWithFaketime('two instances on one SQLite file, the second with its wall clock an hour ahead', () => {
    let first: LedgerProcess;
    let second: LedgerProcess;

    beforeAll(async () => {
      first = await startLedger({ env: ENV });
      second = await startLedger({
        env: {
          ...ENV,
          LEDGER_EVENTS_FILE: `${first.dataDir}/events.sqlite`,
          LD_PRELOAD: LIBFAKETIME as string,
          FAKETIME: '+1h',
          FAKETIME_DONT_FAKE_MONOTONIC: '1',
        },
      });
    });
    afterAll(async () => {
      await Promise.all([first?.stop(), second?.stop()]);
      first?.cleanup();
      second?.cleanup();
    });

    it('the second instance never hands a renewed lease to another worker; it hands over fresh items, and the item once the lease ends', async () => {
      const ref = `run_clocks/held-${randomUUID().slice(0, 8)}`;
      await plan(first, ref);
      const [held] = (
        await until(
          () => poll(first, 'w-holder', 1_000),
          (items) => items.some((item) => item.operation_ref === ref),
          'the item on the first instance',
        )
      ).filter((item) => item.operation_ref === ref);
      expect(held).toMatchObject({ kind: 'dispatch', lease: { holder: 'w-holder' } });
      const dispatched = await call(
        first,
        'POST',
        `${path(ref)}/events`,
        {
          events: [
            {
              event_id: randomUUID(),
              type: 'AttemptDispatched',
              data: { attempt: 1, input_hash: createHash('sha256').update(canonicalJson(INPUT)).digest('hex') },
            },
          ],
        },
        { 'ledger-lease': held.lease.id },
      );
      expect(dispatched.status).toBe(200);

      // Six polls of the second instance, each waiting a second, the lease renewed on the first
      // between them (every third of its length, as the SDK's worker does): never handed over.
      for (let round = 0; round < 6; round++) {
        const renewed = await call(first, 'POST', `${path(ref)}/lease/renew`, {
          lease_id: held.lease.id,
          lease_ms: LEASE_MS,
        });
        expect(renewed.status).toBe(200);
        const items = await poll(second, 'w-other', 1_000);
        expect(items.filter((item) => item.operation_ref === ref)).toEqual([]);
        const holder = await call(second, 'GET', `${path(ref)}/lease`);
        expect(holder.body).toMatchObject({ held: true, holder: 'w-holder' });
      }

      // Fresh work is handed out by the second instance all the while.
      const fresh = `run_clocks/fresh-${randomUUID().slice(0, 8)}`;
      await plan(first, fresh);
      const freshItems = await until(
        () => poll(second, 'w-other', 1_000),
        (items) => items.some((item) => item.operation_ref === fresh),
        'the fresh item on the second instance',
      );
      for (const item of freshItems)
        await call(second, 'POST', `${path(item.operation_ref)}/lease/release`, { lease_id: item.lease.id });

      // The holder stops renewing: once its lease has ended by the shared clock, the second instance takes it over.
      const taken = await until(
        () => poll(second, 'w-other', 1_000),
        (items) => items.some((item) => item.operation_ref === ref),
        'the take-over after the lease ended',
        30_000,
      );
      expect(taken.find((item) => item.operation_ref === ref)).toMatchObject({
        kind: 'verify',
        lease: { holder: 'w-other', took_over_from: 'w-holder' },
      });
      const events = (await call<{ events: Array<{ type: string }> }>(first, 'GET', `${path(ref)}/events`)).body.events;
      expect(events.filter((event) => event.type === 'AttemptDispatched')).toHaveLength(1);
    });

    it('both instances report one shared time base and no skew; the second reports its wall clock off it', async () => {
      const clockOf = async (ledger: LedgerProcess) => (await call(ledger, 'GET', '/health/ready')).body.details.clock;
      const [one, two] = await Promise.all([clockOf(first), clockOf(second)]);
      for (const clock of [one, two]) {
        expect(clock).toMatchObject({
          status: 'up',
          state: 'ok',
          instances: { time_base: 'shared', live_instances: 2, skew_bound_ms: 1000, take_overs: 'allowed' },
        });
        expect(clock.instances.skew_ms).toBeLessThanOrEqual(clock.instances.skew_bound_ms);
      }
      expect(two.instances.time_base_since).toBe(one.instances.time_base_since);
      expect(two.steps_detected).toBeGreaterThanOrEqual(1);
      expect(two.offset_ms).toBeGreaterThan(3_500_000);
      const metrics = await (await fetch(`${second.baseUrl}/metrics`)).text();
      expect(metrics).toMatch(/^ledger_clock_instance_skew_seconds 0(\.\d+)?$/m);
      expect(metrics).toMatch(/^ledger_clock_take_overs_held 0$/m);
    });
  });

  describeWithFaketime('two instances on one EventStoreDB as on two hosts, the second an hour ahead', () => {
    const store = eventStoreDbStore();
    let first: LedgerProcess;
    let second: LedgerProcess;
    const clocks = { LEDGER_CLOCK_HEARTBEAT_MS: '500' };

    beforeAll(async () => {
      await store.start();
      first = await startLedger({
        env: { ...ENV, ...store.env(), ...clocks, LEDGER_CLOCK_BOOT_ID: 'host-a' },
        timeoutMs: 60_000,
      });
      second = await startLedger({
        env: {
          ...ENV,
          ...store.env(),
          ...clocks,
          LEDGER_CLOCK_BOOT_ID: 'host-b',
          LD_PRELOAD: LIBFAKETIME as string,
          FAKETIME: '+1h',
          FAKETIME_DONT_FAKE_MONOTONIC: '1',
        },
        timeoutMs: 60_000,
      });
    });
    afterAll(async () => {
      await Promise.all([first?.stop(), second?.stop()]);
      first?.cleanup();
      second?.cleanup();
      await store.stop();
    });

    it('both see the skew and say so; neither hands an expired lease over; fresh work still goes out', async () => {
      const clockOf = async (ledger: LedgerProcess) => (await call(ledger, 'GET', '/health/ready')).body.details.clock;
      for (const ledger of [first, second]) {
        const clock = await until(
          () => clockOf(ledger),
          (seen) => seen?.instances?.reason === 'skew',
          'the skew on both instances',
        );
        expect(clock).toMatchObject({
          status: 'up',
          state: 'degraded',
          instances: { live_instances: 2, take_overs: 'held', skew_bound_ms: 1000 },
        });
        expect(clock.instances.skew_ms).toBeGreaterThan(3_500_000);
        expect(clock.message).toMatch(/differ by \d+ ms \(bound 1000 ms\)/);
        const metrics = await (await fetch(`${ledger.baseUrl}/metrics`)).text();
        expect(Number(/^ledger_clock_instance_skew_seconds (\S+)$/m.exec(metrics)?.[1])).toBeGreaterThan(3_500);
        expect(metrics).toMatch(/^ledger_clock_take_overs_held 1$/m);
      }

      // A worker takes an item through the first instance, dispatches, and stops renewing.
      const ref = `run_clocks/hosts-${randomUUID().slice(0, 8)}`;
      await plan(first, ref);
      const [held] = (
        await until(
          () => poll(first, 'w-holder', 1_000),
          (items) => items.some((item) => item.operation_ref === ref),
          'the item on the first instance',
        )
      ).filter((item) => item.operation_ref === ref);
      const inputHash = createHash('sha256').update(canonicalJson(INPUT)).digest('hex');
      expect(
        (
          await call(
            first,
            'POST',
            `${path(ref)}/events`,
            {
              events: [
                { event_id: randomUUID(), type: 'AttemptDispatched', data: { attempt: 1, input_hash: inputHash } },
              ],
            },
            { 'ledger-lease': held.lease.id },
          )
        ).status,
      ).toBe(200);
      // By the second instance's clock the lease ended an hour ago; by the first's, once its length has passed.
      await until(
        () => call(first, 'GET', `${path(ref)}/lease`),
        (answer) => answer.body.held === false,
        'the lease to end on the first instance',
      );
      for (let round = 0; round < 3; round++) {
        for (const ledger of [second, first])
          expect((await poll(ledger, 'w-other', 500)).filter((item) => item.operation_ref === ref)).toEqual([]);
      }

      const fresh = `run_clocks/hosts-fresh-${randomUUID().slice(0, 8)}`;
      await plan(first, fresh);
      const items = await until(
        () => poll(second, 'w-other', 1_000),
        (found) => found.some((item) => item.operation_ref === fresh),
        'the fresh item on the second instance',
      );
      expect(items.find((item) => item.operation_ref === fresh)).toMatchObject({
        kind: 'dispatch',
        lease: { holder: 'w-other' },
      });
      const events = (await call<{ events: Array<{ type: string }> }>(first, 'GET', `${path(ref)}/events`)).body.events;
      expect(events.filter((event) => event.type === 'AttemptDispatched')).toHaveLength(1);
    });
  });

  describeWithFaketime(
    "attempt 1's window judged by an instance ahead of the one that granted it (one SQLite file, two bases)",
    () => {
      // Short heartbeats: a lead of 2 s is then always seen (a lead above the bound plus one period is).
      const clocks = { LEDGER_CLOCK_HEARTBEAT_MS: '250' };
      const inputHash = createHash('sha256').update(canonicalJson(INPUT)).digest('hex');
      let first: LedgerProcess;

      beforeAll(async () => {
        first = await startLedger({ env: { ...ENV, ...clocks, LEDGER_CLOCK_BOOT_ID: 'host-a' } });
      });
      afterAll(async () => {
        await first?.stop();
        first?.cleanup();
      });

      const clockOf = async (ledger: LedgerProcess) => (await call(ledger, 'GET', '/health/ready')).body.details.clock;
      const submit = (ledger: LedgerProcess, ref: string, type: string, data: Record<string, unknown>) =>
        call(ledger, 'POST', `${path(ref)}/events`, { events: [{ event_id: randomUUID(), type, data }] });
      const notFound = (ledger: LedgerProcess, ref: string) =>
        submit(ledger, ref, 'VerificationRecorded', { outcome: 'not_found', checked_at: new Date().toISOString() });
      type Stored = { type: string; recorded_at: string; data: Record<string, any> };
      const eventsOf = async (ref: string) =>
        (await call<{ events: Stored[] }>(first, 'GET', `${path(ref)}/events`)).body.events;

      /** Attempt 1 granted by the first instance; its window (a 3 s call window, no consistency window) ends by that clock. */
      async function attemptOne(): Promise<{ ref: string; windowEndsMs: number }> {
        const ref = `run_clocks/window-${randomUUID().slice(0, 8)}`;
        const planned = await submit(first, ref, 'StepPlanned', {
          run_id: 'run_clocks',
          tool: 'create_invoice',
          side_effect: 'write',
          input_hash: inputHash,
          input: INPUT,
          policy: { dispatch_timeout_ms: 3_000, consistency_window_ms: 0 },
        });
        expect(planned.status).toBe(200);
        expect((await submit(first, ref, 'AttemptDispatched', { attempt: 1, input_hash: inputHash })).status).toBe(200);
        const dispatch = (await eventsOf(ref)).find((event) => event.type === 'AttemptDispatched') as Stored;
        return { ref, windowEndsMs: Date.parse(dispatch.data.call_deadline) };
      }

      describe('0.9 s ahead, within the bound', () => {
        const SKEW_MS = 900;
        let second: LedgerProcess;
        beforeAll(async () => {
          second = await startLedger({
            env: {
              ...ENV,
              ...clocks,
              LEDGER_EVENTS_FILE: `${first.dataDir}/events.sqlite`,
              LEDGER_CLOCK_BOOT_ID: 'host-b-0.9s',
              LD_PRELOAD: LIBFAKETIME as string,
              FAKETIME: '+0.9',
              FAKETIME_DONT_FAKE_MONOTONIC: '1',
            },
          });
        });
        afterAll(async () => {
          await second?.stop();
          second?.cleanup();
        });

        it('the instance ahead refuses the not_found as premature until the window has passed by the clock that started it; attempt 2 only then', async () => {
          await until(
            () => clockOf(second),
            (clock) => clock?.instances?.live_instances === 2 && clock.instances.take_overs === 'allowed',
            'the two clocks compared, within the bound',
          );
          const { ref, windowEndsMs } = await attemptOne();
          const refusals = new Set<string>();
          await until(
            async () => {
              const answer = await notFound(second, ref);
              if (answer.status !== 200) refusals.add(`${answer.status} ${answer.body.code}`);
              return answer;
            },
            (answer) => answer.status === 200,
            'the not_found taken by the instance ahead',
            30_000,
          );
          expect([...refusals]).toEqual(['409 VERIFICATION_PREMATURE']);
          const again = await submit(second, ref, 'AttemptDispatched', { attempt: 2, input_hash: inputHash });
          expect(again.status).toBe(200);
          // Its own times are 0.9 s ahead of the first's (libfaketime's offset, both on elapsed time since).
          const events = await eventsOf(ref);
          const verified = events.find((event) => event.type === 'VerificationRecorded') as Stored;
          const granted = events.filter((event) => event.type === 'AttemptDispatched')[1];
          expect(Date.parse(verified.recorded_at) - SKEW_MS).toBeGreaterThanOrEqual(windowEndsMs);
          expect(Date.parse(granted.recorded_at) - SKEW_MS).toBeGreaterThanOrEqual(windowEndsMs);
        });
      });

      describe.each([
        ['2 s', '+2', 2_000],
        ['an hour', '+1h', 3_600_000],
      ])('%s ahead, beyond the bound', (label, faketime, skewMs) => {
        let second: LedgerProcess;
        beforeAll(async () => {
          second = await startLedger({
            env: {
              ...ENV,
              ...clocks,
              LEDGER_EVENTS_FILE: `${first.dataDir}/events.sqlite`,
              LEDGER_CLOCK_BOOT_ID: `host-b-${faketime}`,
              LD_PRELOAD: LIBFAKETIME as string,
              FAKETIME: faketime,
              FAKETIME_DONT_FAKE_MONOTONIC: '1',
            },
          });
        });
        afterAll(async () => {
          await second?.stop();
          second?.cleanup();
        });

        it(`the instance ahead never takes the not_found nor grants attempt 2: premature by its own clock, then 503 CLOCK_SKEW_UNBOUNDED with Retry-After (${label})`, async () => {
          const skew = await until(
            () => clockOf(second),
            (clock) => clock?.instances?.reason === 'skew',
            'the skew seen by the instance ahead',
          );
          expect(skew.instances.skew_ms).toBeGreaterThan(skewMs - 1_000);
          const { ref, windowEndsMs } = await attemptOne();
          const answers: Array<Answer & { sentAt: number }> = [];
          // Asked until the window has passed by the first instance's clock (this process's, the same host's) and a second more.
          await until(
            async () => {
              const sentAt = Date.now();
              answers.push({ ...(await notFound(second, ref)), sentAt });
              return sentAt;
            },
            (sentAt) => sentAt > windowEndsMs + 1_000,
            'the window to pass by the clock that started it',
            30_000,
          );
          expect(answers.filter((answer) => answer.status === 200)).toEqual([]);
          for (const answer of answers)
            expect(`${answer.status} ${answer.body.code}`).toMatch(
              /^(409 VERIFICATION_PREMATURE|503 CLOCK_SKEW_UNBOUNDED)$/,
            );
          const last = answers[answers.length - 1];
          expect(last).toMatchObject({ status: 503, body: { code: 'CLOCK_SKEW_UNBOUNDED', retry_after_seconds: 1 } });
          expect(last.retryAfter).toBe('1');
          const again = await submit(second, ref, 'AttemptDispatched', { attempt: 2, input_hash: inputHash });
          expect(again.body.code).toBe('ATTEMPT_IN_FLIGHT');
          const events = await eventsOf(ref);
          expect(events.filter((event) => event.type === 'VerificationRecorded')).toEqual([]);
          expect(events.filter((event) => event.type === 'AttemptDispatched')).toHaveLength(1);
        });
      });
    },
  );
});

describe('the contract table through LedgerWorker', () => {
  /**
   * The rows of the article's contract table that need processes, driven through the SDK's
   * LedgerWorker over real HTTP with the example provider as a real process (idempotency off, so a
   * duplicate write would show in its own count): a worker process killed with SIGKILL mid-call, and
   * two service processes on one SQLite file, whose leases only the file's write lock (BEGIN
   * IMMEDIATE) keeps apart; in one process the event loop would run their transactions one by one
   * and hide a missing lock. The other rows run in process (test/int/work-feed.int.spec.ts).
   */

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
    startInvoiceStep(client, operationRef, 'run_feed', { consistency_window_ms: 0, ...policy });

  const eventsOf = async (operationRef: string) => (await client.getEvents(operationRef)).events;

  describe('the contract table through the worker alone', () => {
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
  });
});

describe('on EventStoreDB', () => {
  /**
   * The work feed on EventStoreDB (the protocol double): two service instances on one server, a
   * worker on each, the provider as a real process with its idempotency off. Leases are lease
   * streams on the same server, so the instances share them: every step is executed once.
   */

  const store = eventStoreDbStore();
  let a: LedgerProcess;
  let b: LedgerProcess;
  let provider: ProviderProcess;

  beforeAll(async () => {
    await store.start();
    provider = await startProviderProcess(['--no-idempotency']);
    const env = { ...store.env(), LEDGER_RATE_LIMIT_PER_MINUTE: '1000000' };
    a = await startLedger({ env });
    b = await startLedger({ env });
  });

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop(), provider?.stop()]);
    a?.cleanup();
    b?.cleanup();
    await store.stop();
  });

  it('two workers on two instances sharing one EventStoreDB execute each step once', async () => {
    const clientA = new LedgerClient({ baseUrl: a.baseUrl });
    const clientB = new LedgerClient({ baseUrl: b.baseUrl });
    const refs = Array.from({ length: 20 }, (_, index) => `run_esdb_feed/${index}-${randomUUID().slice(0, 8)}`);
    const workers = [
      runWorker(clientA, provider.url, { id: 'esdb-a', concurrency: 6 }),
      runWorker(clientB, provider.url, { id: 'esdb-b', concurrency: 6 }),
    ];
    try {
      await Promise.all(
        refs.map((operationRef, index) =>
          (index % 2 === 0 ? clientA : clientB).startStep({
            operationRef,
            runId: 'run_esdb_feed',
            tool: CREATE_INVOICE,
            input: INVOICE,
            policy: { verification_tool: VERIFICATION_TOOL },
          }),
        ),
      );
      for (const operationRef of refs) await waitForStatus(clientA, operationRef, ['succeeded'], 60_000);
    } finally {
      await Promise.all(workers.map((worker) => worker.stop()));
    }
    const stats = await provider.stats();
    for (const operationRef of refs) {
      expect(stats.create_requests[operationRef]).toBe(1);
      const { events } = await clientB.getEvents(operationRef);
      const dispatches = events.filter((event) => event.type === 'AttemptDispatched');
      expect(dispatches).toHaveLength(1);
      expect((dispatches[0] as any).data).toMatchObject({ attempt: 1 });
    }
    const handled = workers.map((worker) => worker.events.filter((event) => event.type === 'item').length);
    expect(handled[0] + handled[1]).toBe(20);
  });
});

describe('a worker that stands still', () => {
  /**
   * A worker that stands still (GC, a VM stop, SIGSTOP) must not write after the ledger has let
   * another worker conclude that its attempt never happened, and where it still can (a tool whose
   * HTTP client the SDK does not check at the socket), the ledger says so (docs/reliability.md "When
   * an attempt may still reach the provider", "How close the check sits to the write";
   * docs/contract.md §4.9). The built service over real HTTP, the example provider as a real process
   * with its idempotency off (a second create would be a second invoice in its own count) and idle
   * connections kept open for a minute, and the SDK's LedgerWorker in real worker processes.
   */

  const ROOT = resolve(__dirname, '../..');
  const REGISTER = join(ROOT, 'test/chaos/swc-register.cjs');
  const SCRIPT = join(ROOT, 'test/support/paused-feed-worker.ts');

  let ledger: LedgerProcess;
  let provider: ProviderProcess;
  let client: LedgerClient;
  let scratch: string;
  let receiver: Server;
  const hooks: Array<{ type: string; data: { operation_ref?: string } }> = [];
  const children: ChildProcess[] = [];
  const ref = (label: string) => `run_paused/${label}-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    // A pooled connection to the provider outlives the pauses below, as it does for a busy worker.
    provider = await startProviderProcess(['--no-idempotency', '--keep-alive-ms', '60000']);
    receiver = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      request.on('end', () => {
        hooks.push(JSON.parse(body) as (typeof hooks)[number]);
        response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolveListen) => receiver.listen(0, '127.0.0.1', resolveListen));
    // The webhook receiver is on loopback, which a production ledger refuses as a target.
    ledger = await startLedger({ env: { LEDGER_RATE_LIMIT_PER_MINUTE: '1000000', LEDGER_WEBHOOK_ALLOW_PRIVATE: '1' } });
    client = new LedgerClient({ baseUrl: ledger.baseUrl });
    scratch = mkdtempSync(join(tmpdir(), 'paused-worker-'));
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await Promise.all([ledger?.stop(), provider?.stop()]);
    ledger?.cleanup();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
    await new Promise((resolveClose) => receiver?.close(resolveClose));
  });

  interface WorkerProcess {
    lines(): Array<Record<string, any>>;
    /** The process's state letter in /proc (`T`: stopped by a signal). */
    state(): string;
    resume(): void;
    stop(): Promise<void>;
  }

  function startWorker(id: string, args: string[] = []): WorkerProcess {
    const child = spawn(
      process.execPath,
      [
        '--require',
        REGISTER,
        SCRIPT,
        '--ledger',
        ledger.baseUrl,
        '--provider',
        provider.url,
        '--worker-id',
        id,
        '--lease-ms',
        '1000',
        ...args,
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(child);
    let output = '';
    child.stdout!.on('data', (chunk) => (output += chunk));
    child.stderr!.on('data', (chunk) => (output += chunk));
    const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
    return {
      lines: () =>
        output
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as Record<string, any>),
      state: () => /\) (\S)/.exec(readFileSync(`/proc/${child.pid}/stat`, 'utf8'))?.[1] ?? '?',
      resume: () => {
        if (child.exitCode === null) child.kill('SIGCONT');
      },
      stop: async () => {
        if (child.exitCode === null) {
          child.kill('SIGCONT');
          child.kill('SIGTERM');
        }
        await exited;
      },
    };
  }

  const linesOf = (worker: WorkerProcess, event: string) => async () =>
    worker.lines().filter((line) => line.event === event);
  const some = (lines: unknown[]) => lines.length > 0;

  const start = (operationRef: string, policy: Record<string, number>) =>
    startInvoiceStep(client, operationRef, 'run_paused', policy);

  describe('a worker paused between its grant and its call', () => {
    it('does not call when it wakes after another worker verified, retried and created: one invoice', async () => {
      const operationRef = ref('grant');
      const pauseFile = join(scratch, `${randomUUID()}.resume`);
      const paused = startWorker('w-paused', ['--pause-file', pauseFile]);
      let other: WorkerProcess | undefined;
      try {
        await until(linesOf(paused, 'started'), some, 'the paused worker to start');
        await start(operationRef, { dispatch_timeout_ms: 1_000, consistency_window_ms: 1_000 });
        // Granted attempt 1, and now standing still before its call: no renewal, no timer, nothing.
        await until(linesOf(paused, 'pausing'), some, 'the first worker to be granted attempt 1');
        expect(await client.getOperation(operationRef)).toMatchObject({ status: 'dispatched', current_attempt: 1 });

        // The other worker finds the dispatch silent, finds no invoice, and (once the lookup is
        // conclusive) is granted attempt 2 and creates the invoice.
        other = startWorker('w-other');
        await until(
          () => provider.stats(),
          (stats) => (stats.create_requests[operationRef] ?? 0) >= 1,
          'the other worker to create',
          60_000,
        );
        await until(
          () => client.getOperation(operationRef),
          (state) => state.status === 'succeeded',
          'the step to succeed',
        );

        // The first worker wakes, its window long gone.
        writeFileSync(pauseFile, '');
        await until(linesOf(paused, 'recorded'), some, 'the paused worker to record its attempt');
      } finally {
        writeFileSync(pauseFile, '');
        await Promise.all([paused.stop(), other?.stop()]);
      }

      // The provider's own count: one create request, one invoice.
      const stats = await provider.stats();
      expect(stats.create_requests[operationRef]).toBe(1);
      expect(stats.created[operationRef]).toBe(1);
      // It did not call: its envelope came after the step had moved on, and is refused as late.
      const [recorded] = await linesOf(paused, 'recorded')();
      expect(recorded).toMatchObject({
        operation_ref: operationRef,
        attempt: 1,
        tool_called: false,
        code: 'ATTEMPT_MISMATCH',
      });

      const state = await client.getOperation(operationRef);
      expect(state).toMatchObject({ status: 'succeeded', attempts_used: 2 });
      expect(state.possible_duplicate).toBeUndefined();

      const events = (await client.getEvents(operationRef)).events;
      const first = events.find((event) => event.type === 'AttemptDispatched' && event.data.attempt === 1)!;
      // The paused worker declared the rest of its lease as its call window.
      expect(first.data.call_window_ms).toBeLessThanOrEqual(1_000);
      const deadline = Date.parse(first.data.call_deadline as string);
      // The other worker's not_found counted only a consistency window after attempt 1's deadline.
      const conclusive = events.find(
        (event) => event.type === 'VerificationRecorded' && event.data.outcome === 'not_found',
      )!;
      expect(Date.parse(conclusive.recorded_at)).toBeGreaterThanOrEqual(deadline + 1_000);
      // What the paused worker said when it woke is kept as evidence: nothing was sent.
      const late = events.find((event) => event.type === 'LateOutcomeRecorded')!;
      expect(late.data).toMatchObject({
        attempt: 1,
        possible_duplicate: false,
        envelope: { code: 'CALL_WINDOW_PASSED', commit_state: 'not_committed' },
      });
    });
  });

  describe('a worker paused between taking an item and dispatching it', () => {
    it('asks the ledger for its lease again first, and dispatches with a call window left to call in', async () => {
      const operationRef = ref('item');
      const { createInvoice, lookup } = invoiceTools(provider.url, { timeoutMs: 5_000 });
      const stop = new AbortController();
      const events: WorkerEvent[] = [];
      let pausedOnce = false;
      const worker = new LedgerWorker(client, {
        tools: { [CREATE_INVOICE]: { call: createInvoice, lookup } },
        concurrency: 1,
        leaseMs: 1_000,
        waitMs: 200,
        workerId: 'w-slow-start',
        signal: stop.signal,
        onEvent: (event) => {
          events.push(event);
          // The process stands still for longer than the lease, right after the item arrived.
          if (event.type === 'item' && event.operation_ref === operationRef && !pausedOnce) {
            pausedOnce = true;
            const cell = new Int32Array(new SharedArrayBuffer(4));
            Atomics.wait(cell, 0, 0, 1_500);
          }
        },
      });
      const running = worker.run();
      try {
        await start(operationRef, { dispatch_timeout_ms: 10_000, consistency_window_ms: 0 });
        await until(
          () => client.getOperation(operationRef),
          (state) => state.status === 'succeeded',
          'the step to succeed',
        );
      } finally {
        stop.abort();
        await running;
      }
      const stored = (await client.getEvents(operationRef)).events;
      const dispatches = stored.filter((event) => event.type === 'AttemptDispatched');
      expect(dispatches).toHaveLength(1);
      // Dispatched under a lease just renewed: the ledger granted a window to call in (under the
      // expired one it would have been none).
      const windowMs = Date.parse(dispatches[0].data.call_deadline as string) - Date.parse(dispatches[0].recorded_at);
      expect(windowMs).toBeGreaterThan(0);
      expect(events.filter((event) => event.type === 'error' || event.type === 'lease_lost')).toEqual([]);
      expect((await provider.stats()).created[operationRef]).toBe(1);
    });
  });

  describe('a worker stopped (SIGSTOP) in its tool call, after the SDK checked its window, with a kept-alive connection to the provider', () => {
    /**
     * Worker 1 is granted attempt 1, talks to the provider once (a connection kept alive in the pool)
     * and stops itself before its create. Worker 2 finds the dispatch silent, verifies not_found once
     * that is conclusive, is granted attempt 2 and creates. Then worker 1 continues.
     */
    async function stoppedWhileAnotherCreates(operationRef: string, args: string[], beforeResume = async () => {}) {
      const stopped = startWorker(`w-stopped-${operationRef.slice(-8)}`, ['--stop-in-tool', ...args]);
      let other: WorkerProcess | undefined;
      try {
        await until(linesOf(stopped, 'started'), some, 'the first worker to start');
        await start(operationRef, { dispatch_timeout_ms: 1_000, consistency_window_ms: 1_000 });
        await until(linesOf(stopped, 'stopping'), some, 'the first worker to reach its tool call');
        await until(
          async () => stopped.state(),
          (state) => state === 'T',
          'the first worker to be stopped',
        );

        other = startWorker(`w-other-${operationRef.slice(-8)}`);
        await until(
          () => client.getOperation(operationRef),
          (state) => state.status === 'succeeded',
          'the other worker to create and the step to succeed',
          60_000,
        );
        expect((await provider.stats()).created[operationRef]).toBe(1);
        await beforeResume();
        stopped.resume();
        await until(linesOf(stopped, 'recorded'), some, 'the first worker to record its attempt');
      } finally {
        await Promise.all([stopped.stop(), other?.stop()]);
      }
      const [recorded] = await linesOf(stopped, 'recorded')();
      const events = (await client.getEvents(operationRef)).events;
      return { recorded, events, stats: await provider.stats() };
    }

    it('through callHttpTool: the late create never reaches the provider, one invoice', async () => {
      const operationRef = ref('stopped');
      const { recorded, events, stats } = await stoppedWhileAnotherCreates(operationRef, []);

      // Before the write-once connection the pooled socket wrote the create on SIGCONT: two requests, two invoices.
      expect(stats.create_requests[operationRef]).toBe(1);
      expect(stats.created[operationRef]).toBe(1);
      expect(recorded).toMatchObject({
        operation_ref: operationRef,
        attempt: 1,
        tool_called: true,
        code: 'ATTEMPT_MISMATCH',
      });
      const late = events.find((event) => event.type === 'LateOutcomeRecorded')!;
      expect(late.data).toMatchObject({
        attempt: 1,
        possible_duplicate: false,
        envelope: { code: 'CALL_WINDOW_PASSED', commit_state: 'not_committed' },
      });
      expect((await client.getOperation(operationRef)).possible_duplicate).toBeUndefined();
    });

    it('through a fetch of the tool’s own: the late create may reach the provider, and the ledger shows the possible duplicate in the state, triage and a webhook', async () => {
      const subscribed = await fetch(`${ledger.baseUrl}/v1/admin/webhooks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`,
          kinds: ['operation.possible_duplicate'],
        }),
      });
      expect(subscribed.status).toBe(201);
      const operationRef = ref('own-http');
      // The provider answers the late create slowly: the SDK's window signal cuts the call off after
      // it left, so the worker reports an unknown outcome rather than a success.
      const { recorded, events, stats } = await stoppedWhileAnotherCreates(operationRef, ['--own-http'], () =>
        provider.inject({ operation_ref: operationRef, fault: { kind: 'slow', delay_ms: 3_000 }, times: 1 }),
      );

      expect(recorded).toMatchObject({ operation_ref: operationRef, attempt: 1, tool_called: true });
      const late = events.find((event) => event.type === 'LateOutcomeRecorded')!;
      expect(late.data).toMatchObject({ attempt: 1, possible_duplicate: true, envelope: { commit_state: 'unknown' } });
      // What the provider holds: the pooled connection wrote the late create.
      expect(stats.create_requests[operationRef]).toBe(2);
      const state = await client.getOperation(operationRef);
      expect(state).toMatchObject({ status: 'succeeded', possible_duplicate: { attempt: 1 } });
      const position = Math.max(...events.map((event) => event.position));
      const triage = (await (
        await fetch(`${ledger.baseUrl}/v1/triage?kind=possible_duplicate&wait_for_position=${position}`)
      ).json()) as { items: unknown[] };
      expect(triage.items).toEqual([
        expect.objectContaining({ kind: 'possible_duplicate', operation_ref: operationRef }),
      ]);
      await until(
        async () => hooks.filter((hook) => hook.data?.operation_ref === operationRef),
        (delivered) => delivered.length > 0,
        'the operation.possible_duplicate webhook',
      );
      expect(hooks.find((hook) => hook.data?.operation_ref === operationRef)).toMatchObject({
        type: 'operation.possible_duplicate',
      });
    });
  });
});
