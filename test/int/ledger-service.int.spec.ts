import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_ENVELOPE_LIMITS, DEFAULT_POLICY, LedgerProblem, type SubmittedEvent } from '@recovery-ledger/core';
import type { Clock } from '../../src/shared/clock';
import { LedgerService } from '../../src/ledger/ledger.service';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { verifyChain } from '../../src/integrity/hash-chain';
import { operationStream } from '../../src/store/stream-names';
import { outcomeUnknown, REF } from '../../packages/core/test/support/given';

const settings = { envelopeLimits: DEFAULT_ENVELOPE_LIMITS, defaultPolicy: DEFAULT_POLICY, maxConflictRetries: 50 };
const context = { tenant: 'acme', actor: 'key_test', operationRef: REF };

class ManualClock implements Clock {
  constructor(public current = Date.parse('2026-12-02T10:00:00.000Z')) {}
  now = () => new Date(this.current);
}

const ev = (
  type: SubmittedEvent['type'],
  data: Record<string, unknown>,
  event_id: string = randomUUID(),
): SubmittedEvent => ({
  event_id,
  type,
  data: data as SubmittedEvent['data'],
});
const plan = () =>
  ev('StepPlanned', { run_id: 'run_81', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1' });
const dispatch = (attempt = 1, id?: string) => ev('AttemptDispatched', { attempt, input_hash: 'h1' }, id);

async function refusalOf(promise: Promise<unknown>): Promise<LedgerProblem> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof LedgerProblem) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('LedgerService on the SQLite store', () => {
  let dir: string;
  let store: SqliteEventStore;
  let clock: ManualClock;
  let ledger: LedgerService;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-service-'));
    store = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
    clock = new ManualClock();
    ledger = new LedgerService(store, clock, settings);
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers a resubmission with the first answer and appends nothing', async () => {
    const planned = plan();
    const first = await ledger.submit(context, { events: [planned] });
    await ledger.submit(context, { events: [dispatch()] });
    const again = await ledger.submit(context, { events: [planned] });
    expect(again).toEqual({ ...first, results: [{ event_id: planned.event_id, status: 'duplicate' }] });
    expect((await store.readStream(operationStream('acme', REF))).length).toBe(4);
  });

  it('answers a resubmitted refused dispatch with the same refusal, recorded once', async () => {
    await ledger.submit(context, { events: [plan()] });
    await ledger.submit(context, { events: [dispatch()] });
    const racer = dispatch(2);
    expect((await refusalOf(ledger.submit(context, { events: [racer] }))).code).toBe('ATTEMPT_IN_FLIGHT');
    const revision = (await store.readStream(operationStream('acme', REF))).length;
    expect((await refusalOf(ledger.submit(context, { events: [racer] }))).code).toBe('ATTEMPT_IN_FLIGHT');
    expect((await store.readStream(operationStream('acme', REF))).length).toBe(revision);
  });

  it('refuses an event id reused for another fact', async () => {
    const planned = plan();
    await ledger.submit(context, { events: [planned] });
    const reused = { ...planned, data: { ...planned.data, input_hash: 'other' } };
    expect((await refusalOf(ledger.submit(context, { events: [reused] }))).code).toBe('EVENT_ID_REUSED');
  });

  it('stores nothing of a submit in which a later fact is refused', async () => {
    await ledger.submit(context, { events: [plan()] });
    const bad = ev('EnvelopeRecorded', { attempt: 1, envelope: { ...outcomeUnknown(), next_action: 'escalate' } });
    const error = await refusalOf(ledger.submit(context, { events: [dispatch(), bad] }));
    expect(error.code).toBe('ENVELOPE_INVALID');
    expect(error.extras.field).toBe('events[1].data.envelope.next_action');
    expect((await store.readStream(operationStream('acme', REF))).map((e) => e.type)).toEqual([
      'StepPlanned',
      'TransitionRecorded',
    ]);
  });

  it('keeps tenants apart: the same ref in another tenant is another operation', async () => {
    await ledger.submit(context, { events: [plan()] });
    expect((await refusalOf(ledger.getState('other', REF))).code).toBe('OPERATION_NOT_FOUND');
  });

  it('grants exactly one of 20 racing dispatches across two instances sharing the file', async () => {
    const second = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
    const otherInstance = new LedgerService(second, clock, settings);
    try {
      await ledger.submit(context, { events: [plan()] });
      const outcomes = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) =>
          (i % 2 ? otherInstance : ledger).submit(context, { events: [dispatch()] }),
        ),
      );
      const granted = outcomes.filter((o) => o.status === 'fulfilled');
      const refused = outcomes.filter((o) => o.status === 'rejected') as PromiseRejectedResult[];
      expect(granted).toHaveLength(1);
      expect(refused.map((o) => (o.reason as LedgerProblem).code)).toEqual(Array(19).fill('ATTEMPT_IN_FLIGHT'));
      const events = await store.readStream(operationStream('acme', REF));
      expect(events.filter((e) => e.type === 'AttemptDispatched')).toHaveLength(1);
      expect(events.filter((e) => e.type === 'DispatchRefused')).toHaveLength(19);
      expect(verifyChain(events)).toBeUndefined();
    } finally {
      await second.close();
    }
  });

  it('judges not_before by its own clock', async () => {
    await ledger.submit(context, { events: [plan()] });
    await ledger.submit(context, { events: [dispatch()] });
    const notBefore = new Date(clock.current + 60_000).toISOString();
    await ledger.submit(context, {
      events: [
        ev('EnvelopeRecorded', {
          attempt: 1,
          envelope: {
            ok: false,
            code: 'RATE_LIMITED',
            category: 'dependency',
            commit_state: 'not_committed',
            retry: { directive: 'after_delay', not_before: notBefore, max_attempts_remaining: 2 },
            next_action: 'wait_and_retry',
            operation_ref: REF,
            safe_details: {},
            agent_message: '',
            user_message: '',
          },
        }),
      ],
    });
    const early = await refusalOf(ledger.submit(context, { events: [dispatch(2)] }));
    expect(early.code).toBe('RETRY_NOT_BEFORE');
    expect(early.extras.retryAfterSeconds).toBe(60);
    clock.current += 60_000;
    await expect(ledger.submit(context, { events: [dispatch(2)] })).resolves.toMatchObject({
      state: { status: 'dispatched' },
    });
  });
});
