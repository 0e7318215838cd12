/**
 * The ledger on a wall clock that steps while it runs (docs/reliability.md, "A stepped clock"):
 * windows and not_before are judged on elapsed time, recorded_at never runs backwards in a stream,
 * and a restart on a clock set behind what was recorded only waits, never reopens a window.
 */
import { randomUUID } from 'node:crypto';
import { DEFAULT_ENVELOPE_LIMITS, DEFAULT_POLICY, LedgerProblem, type SubmittedEvent } from '@recovery-ledger/core';
import { MonotonicClock } from '../../src/shared/clock';
import { LedgerService } from '../../src/ledger/ledger.service';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { operationStream } from '../../src/store/stream-names';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';

const HOUR = 3_600_000;
const settings = { envelopeLimits: DEFAULT_ENVELOPE_LIMITS, defaultPolicy: DEFAULT_POLICY, maxConflictRetries: 5 };
const ev = (type: SubmittedEvent['type'], data: Record<string, unknown>): SubmittedEvent => ({
  event_id: randomUUID(),
  type,
  data: data as never,
});

function machine(startWall = Date.parse('2026-05-01T10:00:00.000Z')) {
  const time = { wall: startWall, monotonic: 0 };
  const clock = new MonotonicClock({ wallNow: () => time.wall, monotonicNow: () => time.monotonic });
  return {
    time,
    clock,
    elapse(ms: number) {
      time.wall += ms;
      time.monotonic += ms;
    },
  };
}

async function refusalCode(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof LedgerProblem) return error.code;
    throw error;
  }
  return 'ACCEPTED';
}

describe('decisions on a wall clock that steps', () => {
  let store: SqliteEventStore;
  beforeEach(() => {
    store = SqliteEventStore.open({ file: ':memory:' });
  });
  afterEach(() => store.close());

  async function unknownOutcome(ledger: LedgerService, ref: string) {
    const context = { tenant: 'acme', actor: 'key_test', operationRef: ref };
    await ledger.submit(context, {
      events: [ev('StepPlanned', { run_id: 'run_1', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1' })],
    });
    await ledger.submit(context, { events: [ev('AttemptDispatched', { attempt: 1, input_hash: 'h1' })] });
    await ledger.submit(context, {
      events: [ev('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.outcomeUnknown(ref) })],
    });
    return context;
  }

  it('a step forward of one hour does not end a 30 s consistency window, nor grant a second dispatch', async () => {
    const m = machine();
    const ledger = new LedgerService(store, m.clock, settings);
    const context = await unknownOutcome(ledger, 'run_1/forward');
    m.elapse(1_000);
    m.time.wall += HOUR;
    const notFound = ev('VerificationRecorded', {
      outcome: 'not_found',
      checked_at: new Date(m.time.wall).toISOString(),
    });
    expect(await refusalCode(ledger.submit(context, { events: [notFound] }))).toBe('VERIFICATION_PREMATURE');
    expect(
      await refusalCode(
        ledger.submit(context, { events: [ev('AttemptDispatched', { attempt: 2, input_hash: 'h1' })] }),
      ),
    ).toBe('VERIFY_BEFORE_RETRY');
    m.elapse(30_000);
    expect(
      await refusalCode(
        ledger.submit(context, {
          events: [
            ev('VerificationRecorded', { outcome: 'not_found', checked_at: new Date(m.time.wall).toISOString() }),
          ],
        }),
      ),
    ).toBe('ACCEPTED');
  });

  it('a step forward does not bypass a not_before ten minutes ahead', async () => {
    const m = machine();
    const ledger = new LedgerService(store, m.clock, settings);
    const ref = 'run_1/not-before';
    const context = { tenant: 'acme', actor: 'key_test', operationRef: ref };
    await ledger.submit(context, {
      events: [ev('StepPlanned', { run_id: 'run_1', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1' })],
    });
    await ledger.submit(context, { events: [ev('AttemptDispatched', { attempt: 1, input_hash: 'h1' })] });
    const notBefore = new Date(m.clock.now().getTime() + 10 * 60_000).toISOString();
    await ledger.submit(context, {
      events: [ev('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.rateLimited(ref, notBefore) })],
    });
    m.elapse(1_000);
    m.time.wall += HOUR;
    expect(
      await refusalCode(
        ledger.submit(context, { events: [ev('AttemptDispatched', { attempt: 2, input_hash: 'h1' })] }),
      ),
    ).toBe('RETRY_NOT_BEFORE');
  });

  it('a step back of one hour does not stretch the window, and recorded_at never runs backwards', async () => {
    const m = machine();
    const ledger = new LedgerService(store, m.clock, settings);
    const context = await unknownOutcome(ledger, 'run_1/back');
    m.elapse(30_001);
    m.time.wall -= HOUR;
    const notFound = ev('VerificationRecorded', {
      outcome: 'not_found',
      checked_at: new Date(m.time.wall).toISOString(),
    });
    expect(await refusalCode(ledger.submit(context, { events: [notFound] }))).toBe('ACCEPTED');
    const times = (await store.readStream(operationStream('acme', 'run_1/back'))).map((event) =>
      Date.parse(event.metadata.recorded_at),
    );
    for (let i = 1; i < times.length; i++) expect(times[i]).toBeGreaterThanOrEqual(times[i - 1]);
  });

  it('after a restart on a clock set behind the log, time in a stream waits for what was recorded', async () => {
    const before = machine(Date.parse('2026-05-01T11:00:00.000Z'));
    const first = new LedgerService(store, before.clock, settings);
    const context = await unknownOutcome(first, 'run_1/restart');
    // The process restarts with its wall clock an hour behind what it recorded.
    const after = machine(Date.parse('2026-05-01T10:00:00.000Z'));
    const second = new LedgerService(store, after.clock, settings);
    after.elapse(31_000);
    expect(
      await refusalCode(
        second.submit(context, {
          events: [ev('VerificationRecorded', { outcome: 'not_found', checked_at: '2026-05-01T10:00:31.000Z' })],
        }),
      ),
    ).toBe('VERIFICATION_PREMATURE');
    const times = (await store.readStream(operationStream('acme', 'run_1/restart'))).map(
      (event) => event.metadata.recorded_at,
    );
    expect([...times].sort()).toEqual(times);
  });
});
