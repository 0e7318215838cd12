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
import { createHash, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { canonicalJson } from '@recovery-ledger/core/shared/canonical-json';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { eventStoreDbStore } from '../support/store-setup';
import { until } from '../support/until';

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

jest.setTimeout(90_000);

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
