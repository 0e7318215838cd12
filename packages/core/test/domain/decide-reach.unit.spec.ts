import { decide, fold, type PlannedStep, type RecordedEvent, type SubmittedFact } from '@recovery-ledger/core';
import {
  approval,
  at,
  dispatched,
  envelope,
  given,
  invalidRecipient,
  missingApproval,
  nextId,
  outcomeUnknown,
  planned,
  recorded,
  success,
  verified,
} from '../support/given';

/**
 * When an attempt may still reach the provider (docs/contract.md §4.5), late envelopes
 * (§4.9) and approvals bound to an input (§4.4).
 */
const stateOf = (scenario: ReturnType<typeof given>) => scenario.state as PlannedStep;
const policy = { dispatch_timeout_ms: 1_000, consistency_window_ms: 1_000 };

function inFlight(extraPolicy: Record<string, number> = {}) {
  const scenario = given();
  scenario.submit(planned({ policy: { ...policy, ...extraPolicy } }));
  scenario.submit(dispatched(1));
  return scenario;
}

describe('decide: the call deadline of a granted attempt', () => {
  it('is the grant plus the smallest of the declared window, the dispatch timeout and the lease left', () => {
    const base = given();
    base.submit(planned({ policy: { dispatch_timeout_ms: 60_000 } }));
    const deadline = (fact: SubmittedFact, leaseEnds?: string) => {
      const decision = decide(base.state, {
        fact,
        event_id: nextId(),
        now: at(0),
        ...(leaseEnds ? { lease_expires_at: leaseEnds } : {}),
      });
      expect(decision.kind).toBe('accepted');
      return (decision.events[0].data as { call_deadline?: string }).call_deadline;
    };
    expect(deadline(dispatched(1))).toBe(at(60_000));
    expect(
      deadline({
        type: 'AttemptDispatched',
        data: { attempt: 1, input_hash: 'sha256:input-1', call_window_ms: 5_000 },
      }),
    ).toBe(at(5_000));
    expect(deadline(dispatched(1), at(1_000))).toBe(at(1_000));
    // A lease already past its end leaves no time at all: the dispatcher must not call.
    expect(deadline(dispatched(1), at(-5))).toBe(at(0));
  });

  it('is recorded by the ledger: a deadline the dispatcher sends is replaced', () => {
    const base = given();
    base.submit(planned({ policy }));
    const forged = {
      type: 'AttemptDispatched',
      data: { attempt: 1, input_hash: 'sha256:input-1', call_deadline: at(-60_000) },
    } as SubmittedFact;
    const decision = decide(base.state, { fact: forged, event_id: nextId(), now: at(0) });
    expect((decision.events[0].data as { call_deadline: string }).call_deadline).toBe(at(1_000));
  });
});

describe('decide: not_found is conclusive only a consistency window after the last reach', () => {
  it('a silent attempt (paused or dead dispatcher): measured from its call deadline, not from the dispatch', () => {
    const scenario = inFlight();
    // Under the old rule (window from the dispatch) this not_found was conclusive at 1,000 ms.
    const early = scenario.when(verified('not_found'), at(1_500)).thenRefuses('VERIFICATION_PREMATURE');
    expect(early.directive).toMatchObject({ next_action: 'verify_operation', not_before: at(2_000) });
    scenario.when(verified('not_found'), at(2_000)).thenMovesTo('retry_ready');
  });

  it('the lease the dispatch came under ends the reach earlier', () => {
    const scenario = given();
    scenario.submit(planned({ policy: { dispatch_timeout_ms: 60_000, consistency_window_ms: 1_000 } }));
    const granted = decide(scenario.state, {
      fact: dispatched(1),
      event_id: nextId(),
      now: at(0),
      lease_expires_at: at(2_000),
    });
    const events = [
      ...scenario.events,
      ...recorded(
        granted.events,
        granted.events.map(() => at(0)),
      ),
    ];
    const state = fold(events);
    expect(decide(state, { fact: verified('not_found'), event_id: nextId(), now: at(2_999) })).toMatchObject({
      kind: 'refused',
      code: 'VERIFICATION_PREMATURE',
    });
    expect(decide(state, { fact: verified('not_found'), event_id: nextId(), now: at(3_000) }).kind).toBe('accepted');
  });

  it('an envelope ends the call: the window runs from when it was recorded', () => {
    const scenario = inFlight({ dispatch_timeout_ms: 60_000 });
    scenario.submit(envelope(1, outcomeUnknown()), at(200));
    scenario.when(verified('not_found'), at(1_199)).thenRefuses('VERIFICATION_PREMATURE');
    scenario.when(verified('not_found'), at(1_200)).thenMovesTo('retry_ready');
  });

  it('a dispatch stored before call deadlines existed reads as the dispatch plus its plan timeout', () => {
    const history: RecordedEvent[] = [
      ...recorded([planned({ policy: { dispatch_timeout_ms: 5_000, consistency_window_ms: 1_000 } })], [at(0)]),
      ...recorded(
        [
          {
            type: 'TransitionRecorded',
            data: {
              from: 'unplanned',
              to: 'planned',
              reason: 'STEP_PLANNED',
              caused_by: 'x',
              directive: { next_action: 'dispatch', attempts_remaining: 3 },
            },
          },
        ],
        [at(0)],
      ),
      ...recorded([dispatched(1)], [at(0)]),
      ...recorded(
        [
          {
            type: 'TransitionRecorded',
            data: {
              from: 'planned',
              to: 'dispatched',
              reason: 'ATTEMPT_DISPATCHED',
              caused_by: 'y',
              directive: { next_action: 'await_outcome', attempts_remaining: 2 },
            },
          },
        ],
        [at(0)],
      ),
    ];
    const state = fold(history);
    expect(decide(state, { fact: verified('not_found'), event_id: nextId(), now: at(5_999) })).toMatchObject({
      kind: 'refused',
      code: 'VERIFICATION_PREMATURE',
    });
    expect(decide(state, { fact: verified('not_found'), event_id: nextId(), now: at(6_000) }).kind).toBe('accepted');
  });
});

describe('decide: a late envelope is evidence', () => {
  it('the success of attempt 1 after attempt 2 was granted is recorded as a possible duplicate', () => {
    const scenario = inFlight();
    scenario.submit(verified('not_found'), at(2_000));
    scenario.submit(dispatched(2), at(2_001));
    const late = scenario.when(envelope(1, success()), at(2_500)).thenRefuses('ATTEMPT_MISMATCH');
    expect(late.events.map((event) => event.type)).toEqual(['LateOutcomeRecorded']);
    expect(late.events[0].data).toMatchObject({ attempt: 1, possible_duplicate: true, envelope: { ok: true } });
    expect(stateOf(scenario)).toMatchObject({
      status: 'dispatched',
      current_attempt: 2,
      possible_duplicate: { attempt: 1, recorded_at: at(2_500) },
    });
  });

  it('a late unknown outcome of attempt 1 after attempt 2 was granted is a possible duplicate: its call may have reached the provider', () => {
    const scenario = inFlight();
    scenario.submit(verified('not_found'), at(2_000));
    scenario.submit(dispatched(2), at(2_001));
    const late = scenario.when(envelope(1, outcomeUnknown()), at(2_500)).thenRefuses('ATTEMPT_MISMATCH');
    expect(late.events).toEqual([
      expect.objectContaining({
        type: 'LateOutcomeRecorded',
        data: expect.objectContaining({ possible_duplicate: true }),
      }),
    ]);
    expect(stateOf(scenario)).toMatchObject({
      status: 'dispatched',
      current_attempt: 2,
      possible_duplicate: { attempt: 1, recorded_at: at(2_500) },
    });
  });

  it('a late unknown outcome after the later attempt succeeded is a possible duplicate, and the success stands', () => {
    const scenario = inFlight();
    scenario.submit(verified('not_found'), at(2_000));
    scenario.submit(dispatched(2), at(2_001));
    scenario.submit(envelope(2, success()), at(2_100));
    const late = scenario.when(envelope(1, outcomeUnknown()), at(2_500)).thenRefuses('ATTEMPT_MISMATCH');
    expect(late.events[0].data).toMatchObject({ attempt: 1, possible_duplicate: true });
    expect(stateOf(scenario)).toMatchObject({ status: 'succeeded', possible_duplicate: { attempt: 1 } });
  });

  it('a late failure that committed nothing is recorded without the flag, and changes nothing', () => {
    const scenario = inFlight();
    scenario.submit(verified('not_found'), at(2_000));
    scenario.submit(dispatched(2), at(2_001));
    const late = scenario.when(envelope(1, invalidRecipient()), at(2_500)).thenRefuses('ATTEMPT_MISMATCH');
    expect(late.events[0]).toMatchObject({ type: 'LateOutcomeRecorded', data: { possible_duplicate: false } });
    expect(stateOf(scenario)).toMatchObject({ status: 'dispatched', current_attempt: 2 });
    expect(stateOf(scenario).possible_duplicate).toBeUndefined();
  });

  it('an attempt that reported nothing and was verified not_found past its window is an ordinary retry', () => {
    const scenario = inFlight();
    scenario.submit(verified('not_found'), at(2_000));
    scenario.when(dispatched(2), at(2_001)).thenMovesTo('dispatched');
    scenario.when(envelope(2, success()), at(2_100)).thenMovesTo('succeeded');
    expect(stateOf(scenario).possible_duplicate).toBeUndefined();
  });

  it('a late unknown outcome of the attempt verified not_found, before any other was granted, asks for the lookup again', () => {
    const scenario = inFlight();
    scenario.submit(verified('not_found'), at(2_000));
    const late = scenario.when(envelope(1, outcomeUnknown()), at(2_500)).thenMovesTo('verifying');
    expect(late.events.map((event) => event.type)).toEqual(['LateOutcomeRecorded', 'TransitionRecorded']);
    expect(late.events[1].data).toMatchObject({
      reason: 'LATE_OUTCOME_UNKNOWN',
      directive: { next_action: 'verify_operation' },
    });
    expect(late.state).toMatchObject({ status: 'verifying' });
    // No new attempt until a lookup settles it, and a not_found counts only a window after the late report.
    scenario.when(dispatched(2), at(2_600)).thenRefuses('VERIFY_BEFORE_RETRY');
    scenario.when(verified('not_found'), at(3_000)).thenRefuses('VERIFICATION_PREMATURE');
    scenario.when(verified('not_found'), at(3_500)).thenMovesTo('retry_ready');
  });

  it('a late unknown outcome of an attempt verified not_found on a step escalated since leaves its outcome unverified', () => {
    const scenario = given();
    scenario.submit(planned({ policy: { ...policy, max_attempts: 1 } }));
    scenario.submit(dispatched(1));
    scenario.when(verified('not_found'), at(2_000)).thenMovesTo('escalated');
    scenario.when(envelope(1, outcomeUnknown()), at(2_500)).thenRefuses('ATTEMPT_MISMATCH');
    expect(stateOf(scenario).status).toBe('escalated');
    const reopen: SubmittedFact = { type: 'StepReopened', data: { attempts: 1, reason: 'try again' } };
    scenario.when(reopen, at(2_600)).thenRefuses('OUTCOME_UNVERIFIED');
  });

  it('the success of the last attempt granted, when nothing is in flight, settles the step: nothing runs again', () => {
    const scenario = inFlight();
    scenario.submit(verified('not_found'), at(2_000));
    const late = scenario.when(envelope(1, success()), at(2_500)).thenMovesTo('succeeded');
    expect(late.events.map((event) => event.type)).toEqual(['LateOutcomeRecorded', 'TransitionRecorded']);
    expect(stateOf(scenario).success).toMatchObject({ attempt: 1, proven_by: 'envelope' });
    expect(scenario.when(dispatched(2), at(2_600)).decision.kind).toBe('replayed');
  });

  it('an envelope of an attempt never granted is refused and not recorded', () => {
    const scenario = inFlight();
    const refused = scenario.when(envelope(3, success())).thenRefuses('ATTEMPT_MISMATCH');
    expect(refused.events).toEqual([]);
  });
});

describe('decide: an approval binds to the input it was asked for', () => {
  function approvedFor(hash: string) {
    const scenario = given();
    scenario.submit(planned({ policy }));
    scenario.submit(dispatched(1, hash));
    scenario.submit(envelope(1, missingApproval()));
    expect(stateOf(scenario)).toMatchObject({ status: 'awaiting_approval', approval_input_hash: hash });
    scenario.when(approval('granted')).thenMovesTo('retry_ready');
    return scenario;
  }

  it('the approval records the input it approves', () => {
    const scenario = approvedFor('sha256:h1');
    const stored = scenario.events.find((event) => event.type === 'ApprovalRecorded');
    expect(stored?.data).toMatchObject({ decision: 'granted', input_hash: 'sha256:h1' });
  });

  it('another input after the approval is refused and asks approval for itself', () => {
    const scenario = approvedFor('sha256:h1');
    const refused = scenario.when(dispatched(2, 'sha256:h2')).thenRefuses('APPROVAL_REQUIRED');
    expect(refused.events.map((event) => event.type)).toEqual(['DispatchRefused', 'TransitionRecorded']);
    expect(stateOf(scenario)).toMatchObject({ status: 'awaiting_approval', approval_input_hash: 'sha256:h2' });
    scenario.when(approval('granted')).thenMovesTo('retry_ready');
    scenario.when(dispatched(2, 'sha256:h2')).thenMovesTo('dispatched');
  });

  it('a validation error after an approved call does not carry the approval to a corrected input', () => {
    const scenario = approvedFor('sha256:h1');
    scenario.submit(dispatched(2, 'sha256:h1'));
    scenario.submit(envelope(2, invalidRecipient(1)));
    expect(stateOf(scenario).status).toBe('needs_input');
    scenario.when(dispatched(3, 'sha256:h2')).thenRefuses('APPROVAL_REQUIRED');
    expect(stateOf(scenario).status).toBe('awaiting_approval');
  });

  it('the approved input itself runs again without a new approval', () => {
    const scenario = approvedFor('sha256:h1');
    scenario.when(dispatched(2, 'sha256:h1')).thenMovesTo('dispatched');
  });

  it('an approver naming another input than the one asked is refused', () => {
    const scenario = given();
    scenario.submit(planned({ policy }));
    scenario.submit(dispatched(1, 'sha256:h1'));
    scenario.submit(envelope(1, missingApproval()));
    const named: SubmittedFact = {
      type: 'ApprovalRecorded',
      data: { decision: 'granted', approver: 'ops', input_hash: 'sha256:h9' },
    };
    scenario.when(named).thenRefuses('FACT_NOT_EXPECTED');
  });
});
