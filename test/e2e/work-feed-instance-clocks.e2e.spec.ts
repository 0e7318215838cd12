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
  return { status: response.status, body: (await response.json()) as T };
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
