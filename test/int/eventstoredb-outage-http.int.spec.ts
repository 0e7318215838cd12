/**
 * The service on EventStoreDB through outages, over HTTP (docs/eventstoredb.md): the protocol double's node is
 * stopped or not ready, or its connections are dropped mid-append and mid-subscription. Submits
 * during an outage answer a typed `503 STORE_UNAVAILABLE` with `Retry-After`, never a 500, never a
 * half write; resubmitting with the same event ids afterwards stores each fact once; and the
 * projections, which re-subscribe from their checkpoint, end exact: equal to what a fresh
 * instance rebuilds from the log.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { StoredEvent } from '../../src/store/event-store.port';
import type { CommitContext } from '../support/eventstoredb-protocol-double/protocol-double';
import { verifyChain } from '../../src/integrity/hash-chain';
import { operationStream } from '../../src/store/stream-names';
import { fact, ledgerAt, opPath, request, type HttpAnswer } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';
import { PROBLEM, envelopes, ok, operation, type Ledger } from '../support/scenario';
import { eventStoreDbStore } from '../support/store-setup';

const TENANT = 'default'; // local mode
const store = eventStoreDbStore();
let ledger: LedgerProcess;
let api: Ledger;

beforeAll(async () => {
  await store.start();
  ledger = await startLedger({ env: store.env() });
  api = ledgerAt(ledger.baseUrl);
});

afterEach(async () => {
  store.double.hooks = {};
  store.double.setUnavailable(false);
  await store.double.start();
});

afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
  await store.stop();
});

/** A typed 503: problem+json, the stable code, a Retry-After in whole seconds, and no internals. */
function expectStoreUnavailable(answer: HttpAnswer): void {
  expect({ status: answer.status, code: answer.body?.code }).toEqual({ status: 503, code: 'STORE_UNAVAILABLE' });
  expect(answer.contentType.startsWith(PROBLEM)).toBe(true);
  const retryAfter = Number(answer.headers.get('retry-after'));
  expect(Number.isInteger(retryAfter) && retryAfter >= 1).toBe(true);
  expect(answer.body.retry_after_seconds).toBe(retryAfter);
  const text = JSON.stringify(answer.body);
  expect(text).not.toContain(String(store.double.port));
  expect(text).not.toMatch(/grpc|UNAVAILABLE:|esdb:|stack/i);
}

/**
 * Submits as a runtime does through an outage: a 503 STORE_UNAVAILABLE is answered by sending the
 * very same events again (same ids) after a short wait, until another answer comes. Answers it and
 * every 503 seen on the way.
 */
async function submitThrough(
  target: Ledger,
  ref: string,
  events: unknown[],
  deadlineMs = 15_000,
): Promise<{ answer: HttpAnswer; unavailable: HttpAnswer[] }> {
  const unavailable: HttpAnswer[] = [];
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const answer = await target.submit(ref, events);
    if (answer.status !== 503) return { answer, unavailable };
    unavailable.push(answer);
    if (Date.now() > deadline) throw new Error(`still 503 after ${deadlineMs} ms: ${JSON.stringify(answer.body)}`);
    await sleep(25);
  }
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

const readiness = async () => (await request(ledger.baseUrl, 'GET', '/health/ready')).status;
const streamOf = (ref: string): Promise<StoredEvent[]> => store.store.readStream(operationStream(TENANT, ref));

/** Every revision once, in order, the hash chain whole, and every fact followed by the transition it caused. */
function expectWhole(events: StoredEvent[]): void {
  expect(events.map((event) => event.revision)).toEqual(events.map((_, index) => index));
  expect(new Set(events.map((event) => event.event_id)).size).toBe(events.length);
  expect(verifyChain(events)).toBeUndefined();
  events.forEach((event, index) => {
    if (event.type === 'TransitionRecorded' || event.type === 'DispatchRefused') return;
    expect({
      fact: event.type,
      next: events[index + 1]?.type,
      causedBy: events[index + 1]?.metadata.causation_event_id,
    }).toEqual({
      fact: event.type,
      next: 'TransitionRecorded',
      causedBy: event.event_id,
    });
  });
}

/** Each projection of `ref` agrees with the stream: the evidence trail lists exactly its events. */
async function expectEvidenceExact(target: LedgerProcess, ref: string, position: number): Promise<any> {
  const evidence = ok(
    await request(target.baseUrl, 'GET', `${opPath(ref)}/evidence?wait_timeout_ms=20000&wait_for_position=${position}`),
  );
  expect(evidence.entries.map((entry: { event_id: string }) => entry.event_id)).toEqual(
    (await streamOf(ref)).map((event) => event.event_id),
  );
  return evidence;
}

const uniqueRun = () => `run_${randomUUID().slice(0, 8)}`;

// First, while the service's subscription has not failed yet: the adapter's backoff grows with
// every failed attempt until a subscription stays up 5 s, and this test cuts it repeatedly.
describe('connections dropped mid-subscription and mid-append, under concurrent load', () => {
  test('every refusal is a typed 503 with Retry-After, each fact is stored once, and the projections end exact', async () => {
    const run = uniqueRun();
    const tool = `tool_${randomUUID().slice(0, 8)}`;
    const double = store.double;
    const subscribesBefore = double.callCounts.Subscribe;
    // Every 13th append loses its answer and every 11th is dropped before it is written (with every
    // other append in flight at that moment).
    const APPENDS = ['Append', 'BatchAppend'];
    let commits = 0;
    double.hooks = {
      beforeCommit: () => {
        if (++commits % 11 === 0) double.dropConnections('dropped before the commit', APPENDS);
      },
      afterCommit: () => {
        if (commits % 13 === 0) double.dropConnections('dropped after the commit', APPENDS);
      },
    };

    const unavailable: HttpAnswer[] = [];
    let lostAnswersResubmitted = 0;
    const unknownOutcomes = new Set<string>();
    const refs: string[] = [];
    const CUTS = 4;
    let cuts = 0;
    let done = false;
    // Four operations each, and more until the subscription has been cut CUTS times (for 20 s at most).
    const until = Date.now() + 20_000;
    const worker = async (w: number) => {
      for (let index = 0; index < 4 || (cuts < CUTS && Date.now() < until); index++) {
        const ref = `${run}/w${w}_op${index}`;
        refs.push(ref);
        const through = async (events: unknown[]) => {
          const { answer, unavailable: seen } = await submitThrough(api, ref, events);
          unavailable.push(...seen);
          const body = ok(answer);
          // Only a resubmission after a lost answer can find its events already stored.
          if (body.results.some((result: { status: string }) => result.status === 'duplicate')) {
            expect(seen.length).toBeGreaterThan(0);
            lostAnswersResubmitted += 1;
          }
          return body;
        };
        await through([
          fact('StepPlanned', {
            run_id: run,
            tool,
            side_effect: 'write',
            input_hash: 'sha256:input-1',
            policy: { consistency_window_ms: 0 },
          }),
        ]);
        await through([fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:input-1' })]);
        if ((w + index) % 2 === 0) {
          await through([fact('EnvelopeRecorded', { attempt: 1, envelope: envelopes.success(ref) })]);
        } else {
          unknownOutcomes.add(ref);
          await through([fact('EnvelopeRecorded', { attempt: 1, envelope: envelopes.outcomeUnknown(ref) })]);
          await through([
            fact('VerificationRecorded', {
              outcome: 'found_committed',
              checked_at: new Date().toISOString(),
              evidence_ref: `inv_${w}_${index}`,
            }),
          ]);
        }
      }
    };
    // Meanwhile the projections' subscription is cut while events stream to it, each time once
    // the adapter has subscribed again (from its checkpoint, after its backoff).
    const cutter = (async () => {
      let subscribedAt = -1;
      while (!done && cuts < CUTS) {
        await sleep(40);
        if (double.callCounts.Subscribe === subscribedAt) continue;
        subscribedAt = double.callCounts.Subscribe;
        if (double.dropConnections('dropped mid-subscription', ['Read']) > 0) cuts += 1;
      }
    })();
    try {
      await Promise.all(Array.from({ length: 4 }, (_, w) => worker(w)));
    } finally {
      done = true;
      await cutter;
      double.hooks = {};
    }

    for (const answer of unavailable) expectStoreUnavailable(answer);
    expect(unavailable.length).toBeGreaterThan(0);
    expect(lostAnswersResubmitted).toBeGreaterThan(0);
    expect(cuts).toBe(CUTS);

    // The log: each operation whole, every fact once.
    const streams = await Promise.all(refs.map((ref) => streamOf(ref)));
    streams.forEach((events) => expectWhole(events));
    const last = Math.max(...streams.flatMap((events) => events.map((event) => event.position)));

    // The projections of the instance that lived through it all, against the log ...
    for (const ref of refs) await expectEvidenceExact(ledger, ref, last);
    const runSummary = ok(
      await request(
        ledger.baseUrl,
        'GET',
        `/v1/runs/${encodeURIComponent(run)}?wait_timeout_ms=20000&wait_for_position=${last}`,
      ),
    );
    expect(runSummary).toMatchObject({ run_id: run, total: refs.length, open: 0, counts: { succeeded: refs.length } });
    const trust = ok(
      await request(
        ledger.baseUrl,
        'GET',
        `/v1/metrics/trust?tool=${tool}&wait_timeout_ms=20000&wait_for_position=${last}`,
      ),
    );
    expect(trust.tools).toEqual([
      expect.objectContaining({
        tool,
        operations_planned: refs.length,
        succeeded: refs.length,
        unknown_outcomes: unknownOutcomes.size,
        verified_found_committed: unknownOutcomes.size,
        duplicate_writes_prevented: 0,
        pending_recovery_now: 0,
      }),
    ]);
    expect(
      (
        await request(
          ledger.baseUrl,
          'GET',
          `/v1/recovery?tool=${tool}&wait_timeout_ms=20000&wait_for_position=${last}`,
        )
      ).body.items,
    ).toEqual([]);
    // The adapter subscribed again after every cut, and readiness is back.
    await waitFor('a subscription after the last cut', async () =>
      double.callCounts.Subscribe - subscribesBefore >= CUTS ? true : undefined,
    );
    await waitFor('readiness', async () => ((await readiness()) === 200 ? true : undefined));
    // ... and the outage is counted in the metrics, with nothing left down.
    const metrics = (await request(ledger.baseUrl, 'GET', '/metrics')).body as string;
    expect(Number(/^ledger_store_resubscriptions_total (\d+)/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(CUTS);
    expect(/^ledger_store_subscriptions_down (\d+)/m.exec(metrics)?.[1]).toBe('0');

    // ... and against a fresh instance that builds its read models from the log alone.
    const fresh = await startLedger({ env: store.env() });
    try {
      for (const ref of refs) {
        const path = `${opPath(ref)}/evidence?wait_timeout_ms=20000&wait_for_position=${last}`;
        const [survivor, rebuilt] = await Promise.all(
          [ledger, fresh].map((target) => request(target.baseUrl, 'GET', path)),
        );
        expect(ok(rebuilt).entries).toEqual(ok(survivor).entries);
        expect(rebuilt.body.verdict).toEqual(survivor.body.verdict);
      }
      const rebuiltRun = ok(
        await request(
          fresh.baseUrl,
          'GET',
          `/v1/runs/${encodeURIComponent(run)}?wait_timeout_ms=20000&wait_for_position=${last}`,
        ),
      );
      expect(rebuiltRun.steps).toEqual(runSummary.steps);
      const rebuiltTrust = ok(
        await request(
          fresh.baseUrl,
          'GET',
          `/v1/metrics/trust?tool=${tool}&wait_timeout_ms=20000&wait_for_position=${last}`,
        ),
      );
      expect(rebuiltTrust.tools).toEqual(trust.tools);
    } finally {
      await fresh.stop();
      fresh.cleanup();
    }
  });
});

describe.each([
  ['stopped', () => store.double.stop(), () => store.double.start()],
  ['not ready', async () => store.double.setUnavailable(true), async () => store.double.setUnavailable(false)],
])('the node %s', (_kind, down, up) => {
  test('submits and reads answer a typed 503 with Retry-After, at once; readiness says so; afterwards the same submit stores once', async () => {
    const ref = `${uniqueRun()}/charge`;
    const op = operation(api, ref);
    ok(await op.plan());
    const before = await store.dumpLog(ledger);
    const dispatch = [fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:input-1' })];

    await down();
    for (const ask of [() => api.submit(ref, dispatch), () => api.submit(ref, dispatch), () => op.state()]) {
      const started = Date.now();
      expectStoreUnavailable(await ask());
      // Well inside the adapter's 10 s append and 30 s read deadlines: an outage is not waited out.
      expect(Date.now() - started).toBeLessThan(5_000);
    }
    expect(await readiness()).toBe(503);
    expect((await request(ledger.baseUrl, 'GET', '/health/live')).status).toBe(200);
    await up();

    const { answer } = await submitThrough(api, ref, dispatch);
    expect(ok(answer).results).toEqual([{ event_id: dispatch[0].event_id, status: 'appended' }]);
    expect(answer.body.state).toMatchObject({ status: 'dispatched', current_attempt: 1 });
    const log = await streamOf(ref);
    expectWhole(log);
    expect(log.map((event) => event.type)).toEqual([
      'StepPlanned',
      'TransitionRecorded',
      'AttemptDispatched',
      'TransitionRecorded',
    ]);
    expect(JSON.parse(before).length + 2).toBe(JSON.parse(await store.dumpLog(ledger)).length);
    await waitFor('readiness', async () => ((await readiness()) === 200 ? true : undefined));
    await expectEvidenceExact(ledger, ref, answer.body.position);
  });
});

describe('connections dropped mid-append', () => {
  /**
   * A hook that drops every connection of the double, the first time the given event reaches it.
   * Appends of the service's own (checkpoints, leases) may commit meanwhile: they pass untouched.
   */
  const dropOnce = (eventId: string) => {
    let dropped = 0;
    return {
      drop: (context: CommitContext) => {
        if (!context.eventIds.includes(eventId)) return;
        if (dropped++ === 0) store.double.dropConnections();
      },
      get count() {
        return dropped;
      },
    };
  };

  test('before the commit: a typed 503, nothing stored; the same submit then appends it once', async () => {
    const ref = `${uniqueRun()}/charge`;
    const op = operation(api, ref);
    ok(await op.plan());
    const dispatch = [fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:input-1' })];
    const before = await store.dumpLog(ledger);
    const hook = dropOnce(dispatch[0].event_id);
    store.double.hooks = { beforeCommit: hook.drop };

    expectStoreUnavailable(await api.submit(ref, dispatch));
    expect(hook.count).toBe(1);
    expect(await store.dumpLog(ledger)).toBe(before);

    const { answer } = await submitThrough(api, ref, dispatch);
    expect(ok(answer).results).toEqual([{ event_id: dispatch[0].event_id, status: 'appended' }]);
    const log = await streamOf(ref);
    expectWhole(log);
    expect(log.filter((event) => event.type === 'AttemptDispatched').map((event) => event.event_id)).toEqual([
      dispatch[0].event_id,
    ]);
    await expectEvidenceExact(ledger, ref, answer.body.position);
  });

  test('after the commit (the answer is lost): a typed 503, the write is whole, and the same submit answers "duplicate" with the first result', async () => {
    const ref = `${uniqueRun()}/charge`;
    const op = operation(api, ref);
    ok(await op.plan());
    ok(await op.dispatch(1));
    const envelope = [fact('EnvelopeRecorded', { attempt: 1, envelope: envelopes.success(ref) })];
    const hook = dropOnce(envelope[0].event_id);
    store.double.hooks = { afterCommit: hook.drop };

    const lost = await api.submit(ref, envelope);
    expectStoreUnavailable(lost);
    expect(hook.count).toBe(1);
    // The outcome was unknown to the service, and the answer must not claim otherwise ...
    expect(lost.body.detail).not.toMatch(/nothing (was|is) stored/i);
    expect(lost.body.detail).toMatch(/same event_ids/);
    // ... for the log has the whole append: fact and transition.
    const written = await streamOf(ref);
    expectWhole(written);
    expect(written.slice(-2).map((event) => event.type)).toEqual(['EnvelopeRecorded', 'TransitionRecorded']);

    const { answer } = await submitThrough(api, ref, envelope);
    expect(ok(answer).results).toEqual([{ event_id: envelope[0].event_id, status: 'duplicate' }]);
    expect(answer.body.revision).toBe(written[written.length - 1].revision);
    expect(answer.body.state).toMatchObject({ status: 'succeeded', success: { attempt: 1, proven_by: 'envelope' } });
    expect(await streamOf(ref)).toHaveLength(written.length);
    await expectEvidenceExact(ledger, ref, written[written.length - 1].position);
  });
});

describe('an outage while the start-up audit runs', () => {
  it('audits the log again once the store is back: readiness comes back without a person', async () => {
    store.double.setUnavailable(true);
    const second = await startLedger({ env: store.env() });
    try {
      const integrity = async () => (await request(second.baseUrl, 'GET', '/health/ready')).body?.details?.integrity;
      // The audit the outage cut short is reported, not hidden ...
      await waitFor('the audit to fail on the outage', async () =>
        (await integrity())?.state === 'unverifiable' ? true : undefined,
      );
      store.double.setUnavailable(false);
      // ... and run again once the store answers, with no admin asking for it.
      await waitFor(
        'the audit to run again and verify the log',
        async () => ((await integrity())?.state === 'verified' ? true : undefined),
        90_000,
      );
      expect((await request(second.baseUrl, 'GET', '/health/ready')).status).toBe(200);
    } finally {
      await second.stop();
      second.cleanup();
    }
  });
});

describe('the append path', () => {
  // The server lists BatchAppend, whose settling is shared by every client in the process: one
  // client's failed stream rejects the others' appends and throws inside the client
  // (docs/eventstoredb.md). Every client the service opens, leases' and time base's too, uses Append.
  test('after every outage above, the service appended only with Append, never with BatchAppend', () => {
    expect(store.double.callCounts.Append).toBeGreaterThan(0);
    expect(store.double.callCounts.BatchAppend).toBe(0);
  });
});
