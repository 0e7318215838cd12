/**
 * docs/contract.md §4: "Times (not_before, consistency windows) are judged by the ledger's clock, never the
 * client's." A runtime whose clock is minutes off sends its skewed times everywhere a time can be
 * sent (the envelope's not_before, the verification's checked_at, the success's checked_at); every
 * decision must still follow the service's clock. The service runs on this machine, so this
 * process's clock is the service's: recorded_at is bracketed by it, and each accepted decision is
 * checked to have been taken at or after its threshold by the time the ledger itself recorded.
 */
import { LedgerClient, LedgerRefusal, type ToolEnvelope } from '@recovery-ledger/client';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';
import { setTimeout as sleep } from 'node:timers/promises';

const TEN_MINUTES = 10 * 60_000;
const INPUT = 'sha256:clock-input';
/** Attempts of the bounded polls below, 50 ms apart: far more than the 1.2 s thresholds need. */
const MAX_POLLS = 200;

const iso = (ms: number) => new Date(ms).toISOString();

function rateLimited(ref: string, notBefore: string): ToolEnvelope {
  return {
    ok: false,
    code: 'PROVIDER_UNAVAILABLE',
    category: 'dependency',
    commit_state: 'not_committed',
    retry: { directive: 'after_delay', not_before: notBefore, max_attempts_remaining: 3 },
    next_action: 'wait_and_retry',
    operation_ref: ref,
    safe_details: {},
    agent_message: 'The provider is unavailable; nothing was sent.',
    user_message: 'The provider is unavailable right now.',
  };
}

function outcomeUnknown(ref: string): ToolEnvelope {
  return {
    ok: false,
    code: 'OUTCOME_UNKNOWN',
    category: 'dependency',
    commit_state: 'unknown',
    retry: { directive: 'never', max_attempts_remaining: 0 },
    next_action: 'verify_operation',
    operation_ref: ref,
    safe_details: { verification_tool: 'get_invoice_by_operation_ref' },
    agent_message: 'The write may have completed. Verify operation_ref before any new write.',
    user_message: 'The request is being checked before anything is sent again.',
  };
}

async function refusalOf(promise: Promise<unknown>): Promise<LedgerRefusal> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof LedgerRefusal) return error;
    throw error;
  }
  throw new Error('expected a refusal, the ledger accepted');
}

describe('decisions follow the ledger clock, whatever the runtime clock says', () => {
  let ledger: LedgerProcess;
  let client: LedgerClient;
  let counter = 0;

  beforeAll(async () => {
    ledger = await startLedger();
    client = new LedgerClient({ baseUrl: ledger.baseUrl, maxRetries: 0 });
  });

  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  async function dispatchedStep(policy: Record<string, number> = {}) {
    counter += 1;
    const ref = `run_clock/step_${counter}`;
    await client.planStep(ref, {
      run_id: 'run_clock',
      tool: 'create_invoice',
      side_effect: 'write',
      input_hash: INPUT,
      policy: { max_attempts: 5, ...policy },
    });
    await client.dispatchAttempt(ref, { attempt: 1, input_hash: INPUT });
    return ref;
  }

  const recordedAt = async (ref: string, eventId: string) => {
    const { events } = await client.getEvents(ref);
    const event = events.find((candidate) => candidate.event_id === eventId);
    if (!event) throw new Error(`${eventId} is not in ${ref}`);
    return Date.parse(event.recorded_at);
  };

  /** Dispatches attempt 2 with fresh ids until granted; answers the granted event id and the refusals seen. */
  async function dispatchUntilGranted(ref: string): Promise<{ grantedId: string; refusedIds: string[] }> {
    const refusedIds: string[] = [];
    for (let poll = 0; poll < MAX_POLLS; poll++) {
      const eventId = client.newEventId();
      try {
        await client.dispatchAttempt(ref, { attempt: 2, input_hash: INPUT }, { eventId });
        return { grantedId: eventId, refusedIds };
      } catch (error) {
        if (!(error instanceof LedgerRefusal) || error.code !== 'RETRY_NOT_BEFORE') throw error;
        refusedIds.push(eventId);
        await sleep(50);
      }
    }
    throw new Error(`no dispatch of ${ref} was granted in ${MAX_POLLS} tries`);
  }

  test("a runtime ten minutes ahead cannot dispatch before the provider's not_before", async () => {
    const ref = await dispatchedStep();
    // The provider (right clock) asks for 1.2 s; the runtime's clock says that moment passed long ago.
    const notBefore = iso(Date.now() + 1_200);
    const before = Date.now();
    await client.recordEnvelope(ref, { attempt: 1, envelope: rateLimited(ref, notBefore) });
    const early = await refusalOf(client.dispatchAttempt(ref, { attempt: 2, input_hash: INPUT }));
    const after = Date.now();
    expect(early.code).toBe('RETRY_NOT_BEFORE');
    expect(early.directive?.not_before).toBe(notBefore);
    expect(early.retryAfterSeconds).toBeGreaterThanOrEqual(1);

    // The ledger stamped its own time, not the runtime's ten-minutes-ahead one.
    const { events } = await client.getEvents(ref);
    for (const event of events.filter((candidate) => Date.parse(candidate.recorded_at) >= before)) {
      expect(Date.parse(event.recorded_at)).toBeLessThanOrEqual(after);
    }

    const { grantedId, refusedIds } = await dispatchUntilGranted(ref);
    expect(await recordedAt(ref, grantedId)).toBeGreaterThanOrEqual(Date.parse(notBefore));
    for (const refusedId of refusedIds) expect(await recordedAt(ref, refusedId)).toBeLessThan(Date.parse(notBefore));
  });

  test('a not_before written by a runtime ten minutes ahead holds the step for those ten minutes', async () => {
    const ref = await dispatchedStep();
    // The runtime means "in one second", by its clock: ten minutes and a second by the ledger's.
    const skewedNotBefore = iso(Date.now() + TEN_MINUTES + 1_000);
    await client.recordEnvelope(ref, { attempt: 1, envelope: rateLimited(ref, skewedNotBefore) });
    const refused = await refusalOf(client.dispatchAttempt(ref, { attempt: 2, input_hash: INPUT }));
    expect(refused.code).toBe('RETRY_NOT_BEFORE');
    expect(refused.directive?.not_before).toBe(skewedNotBefore);
    expect(refused.retryAfterSeconds).toBeGreaterThan(TEN_MINUTES / 1000 - 60);
  });

  test('a not_before written by a runtime ten minutes behind is already past for the ledger', async () => {
    const ref = await dispatchedStep();
    // "In one second" by a clock ten minutes slow: nine minutes ago by the ledger's clock.
    const skewedNotBefore = iso(Date.now() - TEN_MINUTES + 1_000);
    await client.recordEnvelope(ref, { attempt: 1, envelope: rateLimited(ref, skewedNotBefore) });
    const granted = await client.dispatchAttempt(ref, { attempt: 2, input_hash: INPUT });
    expect(granted.state.status).toBe('dispatched');
    expect(granted.state.current_attempt).toBe(2);
  });

  test('not_found with a checked_at minutes ahead or behind is still inside the window by the ledger clock', async () => {
    const windowMs = 1_200;
    const ref = await dispatchedStep({ consistency_window_ms: windowMs });
    await client.recordEnvelope(ref, { attempt: 1, envelope: outcomeUnknown(ref) });
    const { events } = await client.getEvents(ref);
    // The window runs from the attempt's last reach: here its envelope, the dispatcher's word that
    // the call is over (docs/contract.md §4.5).
    const callEndedAt = Date.parse(events.find((event) => event.type === 'EnvelopeRecorded')!.recorded_at);
    const windowEnds = iso(callEndedAt + windowMs);

    for (const skew of [TEN_MINUTES, -TEN_MINUTES]) {
      const premature = await refusalOf(
        client.recordVerification(ref, { outcome: 'not_found', checked_at: iso(Date.now() + skew) }),
      );
      expect(premature.code).toBe('VERIFICATION_PREMATURE');
      expect(premature.directive?.not_before).toBe(windowEnds);
      expect(premature.state?.status).toBe('verifying');
    }

    const checkedAt = iso(Date.now() + TEN_MINUTES);
    let acceptedId: string | undefined;
    for (let poll = 0; poll < MAX_POLLS && acceptedId === undefined; poll++) {
      const eventId = client.newEventId();
      try {
        const answer = await client.recordVerification(
          ref,
          { outcome: 'not_found', checked_at: checkedAt },
          { eventId },
        );
        expect(answer.state.status).toBe('retry_ready');
        acceptedId = eventId;
      } catch (error) {
        if (!(error instanceof LedgerRefusal) || error.code !== 'VERIFICATION_PREMATURE') throw error;
        await sleep(50);
      }
    }
    expect(acceptedId).toBeDefined();
    expect(await recordedAt(ref, acceptedId as string)).toBeGreaterThanOrEqual(Date.parse(windowEnds));
    // The runtime's checked_at is kept as evidence of what it claimed, not used to decide.
    const stored = (await client.getEvents(ref)).events.find((event) => event.event_id === acceptedId);
    expect(stored?.data.checked_at).toBe(checkedAt);
  });

  test("a success whose checked_at is minutes off is recorded with the ledger's own time", async () => {
    const ref = await dispatchedStep();
    const before = Date.now();
    const skewedCheckedAt = iso(Date.now() - TEN_MINUTES);
    const answer = await client.recordEnvelope(ref, {
      attempt: 1,
      envelope: {
        ok: true,
        operation_ref: ref,
        commit_state: 'committed',
        result: { id: 'inv_1' },
        verification: { checked_at: skewedCheckedAt, evidence_ref: 'inv_1' },
      },
    });
    const after = Date.now();
    expect(answer.state.status).toBe('succeeded');
    const since = Date.parse(answer.state.since as string);
    expect(since).toBeGreaterThanOrEqual(before);
    expect(since).toBeLessThanOrEqual(after);
  });
});
