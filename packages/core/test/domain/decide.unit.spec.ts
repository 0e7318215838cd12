import { attemptsRemaining, decide, isPlanned, type PlannedStep } from '@recovery-ledger/core';
import {
  approval,
  at,
  dispatched,
  envelope,
  escalateNow,
  given,
  invalidRecipient,
  missingApproval,
  outcomeUnknown,
  planned,
  rateLimited,
  success,
  T0,
  verified,
} from '../support/given';

const planned1 = (policy: Parameters<typeof planned>[0] = {}) => {
  const scenario = given();
  scenario.submit(planned(policy));
  return scenario;
};

const inFlight = (policy: Parameters<typeof planned>[0] = {}) => {
  const scenario = planned1(policy);
  scenario.submit(dispatched(1));
  return scenario;
};

const stateOf = (scenario: ReturnType<typeof given>) => scenario.state as PlannedStep;

describe('decide: planning', () => {
  it('plans a new operation and allows the first dispatch', () => {
    const decision = given().when(planned()).then(['StepPlanned', 'TransitionRecorded']);
    expect(decision.events[1].data).toMatchObject({
      from: 'unplanned',
      to: 'planned',
      directive: { next_action: 'dispatch', attempts_remaining: 3 },
    });
  });

  it('treats the same plan again as a no-op', () => {
    planned1().when(planned()).then([]);
  });

  it('refuses the same operation_ref with another definition (OPERATION_REF_REUSED)', () => {
    planned1()
      .when(planned({ input_hash: 'other' }))
      .thenRefuses('OPERATION_REF_REUSED');
    planned1()
      .when(planned({ policy: { max_attempts: 9 } }))
      .thenRefuses('OPERATION_REF_REUSED');
  });

  it.each([dispatched(1), envelope(1, success()), verified('found_committed'), approval('granted')])(
    'refuses any other fact before StepPlanned (STEP_NOT_PLANNED): %o',
    (fact) => {
      const decision = given().when(fact).thenRefuses('STEP_NOT_PLANNED');
      expect(decision.events).toEqual([]);
    },
  );
});

describe('decide: dispatch gate', () => {
  it('grants the first dispatch', () => {
    planned1().when(dispatched(1)).thenMovesTo('dispatched');
  });

  it('tells the runtime to await the outcome while an attempt is in flight, never to dispatch', () => {
    const decision = planned1().when(dispatched(1)).thenMovesTo('dispatched');
    expect(decision.events[1].data).toMatchObject({
      directive: { next_action: 'await_outcome', attempts_remaining: 2 },
    });
    const refused = inFlight().when(dispatched(2)).thenRefuses('ATTEMPT_IN_FLIGHT');
    expect(refused.kind === 'refused' && refused.directive).toEqual({
      next_action: 'await_outcome',
      attempts_remaining: 2,
    });
  });

  it('answers await_outcome to a dispatch in flight on a log written when the stored directive said dispatch', () => {
    const scenario = inFlight();
    const older = scenario.events.map((event) =>
      event.type === 'TransitionRecorded' && event.data.to === 'dispatched'
        ? { ...event, data: { ...event.data, directive: { next_action: 'dispatch' as const, attempts_remaining: 2 } } }
        : event,
    );
    const decision = given(older).when(dispatched(2)).thenRefuses('ATTEMPT_IN_FLIGHT');
    expect(decision.kind === 'refused' && decision.directive.next_action).toBe('await_outcome');
  });

  it('refuses a dispatch while an attempt is in flight (ATTEMPT_IN_FLIGHT) and records the refusal', () => {
    const decision = inFlight().when(dispatched(2)).thenRefuses('ATTEMPT_IN_FLIGHT');
    expect(decision.events).toEqual([
      { type: 'DispatchRefused', data: { attempt: 2, input_hash: 'sha256:input-1', code: 'ATTEMPT_IN_FLIGHT' } },
    ]);
  });

  it('refuses a dispatch with the wrong attempt number (ATTEMPT_MISMATCH)', () => {
    planned1().when(dispatched(2)).thenRefuses('ATTEMPT_MISMATCH');
  });

  it('refuses an envelope for an attempt that is not in flight (ATTEMPT_MISMATCH)', () => {
    inFlight().when(envelope(2, success())).thenRefuses('ATTEMPT_MISMATCH');
    planned1().when(envelope(1, success())).thenRefuses('ATTEMPT_MISMATCH');
  });

  it('keeps a stale worker from landing a result after its replacement', () => {
    const scenario = inFlight();
    // A silent attempt may reach the provider until its call deadline (the dispatch timeout here):
    // not_found is conclusive a consistency window after it (docs/contract.md §4.5).
    scenario.submit(verified('not_found'), at(90_000));
    scenario.submit(dispatched(2), at(91_000));
    scenario.when(envelope(1, success())).thenRefuses('ATTEMPT_MISMATCH');
    scenario.when(envelope(2, success())).thenMovesTo('succeeded');
  });
});

describe('decide: the contract table', () => {
  it('invalid address: not_committed + correct_input → needs_input; no unchanged retry', () => {
    const scenario = inFlight();
    scenario.when(envelope(1, invalidRecipient())).thenMovesTo('needs_input');
    expect(stateOf(scenario).directive).toMatchObject({ next_action: 'correct_input', attempts_remaining: 1 });
    scenario.when(dispatched(2, 'sha256:input-1')).thenRefuses('UNCHANGED_RETRY');
    scenario.when(dispatched(2, 'sha256:input-2')).thenMovesTo('dispatched');
  });

  it('invalid address with no attempts left escalates at once, and a later dispatch is ATTEMPTS_EXHAUSTED', () => {
    const scenario = inFlight();
    scenario.when(envelope(1, invalidRecipient(0))).thenMovesTo('escalated');
    expect(stateOf(scenario).reason).toBe('ATTEMPTS_EXHAUSTED');
    scenario.when(dispatched(2, 'sha256:input-2')).thenRefuses('ATTEMPTS_EXHAUSTED');
  });

  it('read endpoint rate limit: wait_and_retry runs only after not_before (ledger clock)', () => {
    const scenario = inFlight();
    scenario.when(envelope(1, rateLimited(at(30_000)))).thenMovesTo('retry_scheduled');
    expect(stateOf(scenario).directive).toMatchObject({ next_action: 'wait_and_retry', not_before: at(30_000) });
    scenario.when(dispatched(2), at(29_999)).thenRefuses('RETRY_NOT_BEFORE');
    scenario.when(dispatched(2), at(30_000)).thenMovesTo('dispatched');
  });

  it('write socket timeout: unknown + verify_operation → no second write before lookup', () => {
    const scenario = inFlight();
    scenario.when(envelope(1, outcomeUnknown())).thenMovesTo('verifying');
    scenario.when(dispatched(2)).thenRefuses('VERIFY_BEFORE_RETRY');
  });

  it('verification: found_committed converts the original step to success', () => {
    const scenario = inFlight();
    scenario.submit(envelope(1, outcomeUnknown()));
    scenario.when(verified('found_committed', 'inv_123')).thenMovesTo('succeeded');
    expect(stateOf(scenario).success).toMatchObject({ attempt: 1, proven_by: 'verification', evidence_ref: 'inv_123' });
  });

  it('verification: not_found inside the consistency window is refused, after it allows one new attempt', () => {
    const scenario = inFlight({ policy: { consistency_window_ms: 10_000 } });
    scenario.submit(envelope(1, outcomeUnknown()));
    const early = scenario.when(verified('not_found'), at(9_999)).thenRefuses('VERIFICATION_PREMATURE');
    expect(early.directive).toMatchObject({ next_action: 'verify_operation', not_before: at(10_000) });
    expect(early.events).toEqual([]);
    scenario.when(verified('not_found'), at(10_000)).thenMovesTo('retry_ready');
    scenario.when(dispatched(2), at(10_001)).thenMovesTo('dispatched');
  });

  it('verification: lookup_unavailable escalates, never guesses', () => {
    const scenario = inFlight();
    scenario.submit(envelope(1, outcomeUnknown()));
    scenario.when(verified('lookup_unavailable')).thenMovesTo('escalated');
    scenario.when(dispatched(2)).thenRefuses('STEP_ESCALATED');
  });

  it('crash recovery: a verification is accepted straight from dispatched (no envelope ever came back)', () => {
    inFlight().when(verified('found_committed', 'inv_9')).thenMovesTo('succeeded');
  });

  it('duplicate operation key: a dispatch on a succeeded step replays the success and records the prevention', () => {
    const scenario = inFlight();
    scenario.submit(envelope(1, success()));
    const decision = scenario.when(dispatched(2));
    expect(decision.decision.kind).toBe('replayed');
    expect(decision.decision.events).toEqual([
      {
        type: 'DispatchRefused',
        data: { attempt: 2, input_hash: 'sha256:input-1', code: 'DUPLICATE_PREVENTED', replayed_attempt: 1 },
      },
    ]);
    expect(scenario.state.status).toBe('succeeded');
  });

  it('lost approval: request_approval → tool is not invoked again until granted', () => {
    const scenario = inFlight();
    scenario.when(envelope(1, missingApproval())).thenMovesTo('awaiting_approval');
    scenario.when(dispatched(2)).thenRefuses('APPROVAL_REQUIRED');
    scenario.when(approval('granted')).thenMovesTo('retry_ready');
    scenario.when(dispatched(2)).thenMovesTo('dispatched');
  });

  it('lost approval: a denial escalates', () => {
    const scenario = inFlight();
    scenario.submit(envelope(1, missingApproval()));
    scenario.when(approval('denied')).thenMovesTo('escalated');
    scenario.when(dispatched(2)).thenRefuses('STEP_ESCALATED');
  });

  it('repeated provider outage: bounded dependency errors end in terminal escalation', () => {
    const scenario = planned1({ policy: { max_attempts: 10, max_consecutive_dependency_failures: 3 } });
    for (let attempt = 1; attempt <= 2; attempt++) {
      scenario.submit(dispatched(attempt), at(attempt * 1000));
      scenario
        .when(envelope(attempt, rateLimited(at(attempt * 1000 + 1), 9)), at(attempt * 1000))
        .thenMovesTo('retry_scheduled');
    }
    scenario.submit(dispatched(3), at(3000));
    scenario.when(envelope(3, rateLimited(at(3001), 9)), at(3000)).thenMovesTo('escalated');
    expect(stateOf(scenario).reason).toBe('DEPENDENCY_FAILURES_EXHAUSTED');
    scenario.when(dispatched(4), at(5000)).thenRefuses('ATTEMPTS_EXHAUSTED');
  });

  it('a non-dependency failure resets the consecutive dependency count', () => {
    const scenario = planned1({ policy: { max_attempts: 10, max_consecutive_dependency_failures: 2 } });
    scenario.submit(dispatched(1));
    scenario.submit(envelope(1, rateLimited(at(1), 9)));
    scenario.submit(dispatched(2), at(2));
    scenario.submit(envelope(2, rateLimited(at(3), 9, 'conflict')), at(2));
    expect((scenario.state as PlannedStep).consecutive_dependency_failures).toBe(0);
    scenario.submit(dispatched(3), at(4));
    scenario.when(envelope(3, rateLimited(at(5), 9)), at(4)).thenMovesTo('retry_scheduled');
  });
});

describe('decide: bounds', () => {
  it('uses the lower of the policy and the envelope bound', () => {
    const scenario = inFlight({ policy: { max_attempts: 5 } });
    scenario.submit(envelope(1, rateLimited(at(1), 1)));
    expect(attemptsRemaining(stateOf(scenario))).toBe(1);
    scenario.submit(dispatched(2), at(2));
    scenario.when(envelope(2, rateLimited(at(3), 5)), at(2)).thenMovesTo('retry_scheduled');
    expect(attemptsRemaining(stateOf(scenario))).toBe(3);
  });

  it("uses up the envelope's allowance with the dispatch it allowed", () => {
    const scenario = inFlight({ policy: { max_attempts: 5, consistency_window_ms: 0 } });
    scenario.submit(envelope(1, invalidRecipient(1)));
    scenario.when(dispatched(2, 'sha256:input-2')).thenMovesTo('dispatched');
    expect(stateOf(scenario).directive.attempts_remaining).toBe(0);
    // The corrected attempt's envelope is lost; a verified not_found may not open a third attempt.
    // (Conclusive once the silent attempt's call deadline, its dispatch timeout, has passed.)
    scenario.when(verified('not_found'), at(60_000)).thenMovesTo('escalated');
    scenario.when(dispatched(3, 'sha256:input-3')).thenRefuses('ATTEMPTS_EXHAUSTED');
  });

  it('escalates when the policy bound is spent, whatever the envelope says', () => {
    const scenario = inFlight({ policy: { max_attempts: 2, max_consecutive_dependency_failures: 10 } });
    scenario.submit(envelope(1, rateLimited(at(1), 10)));
    scenario.submit(dispatched(2), at(2));
    scenario.when(envelope(2, rateLimited(at(3), 10)), at(2)).thenMovesTo('escalated');
    expect(stateOf(scenario).reason).toBe('ATTEMPTS_EXHAUSTED');
  });

  it('a verified not_found with no attempts left escalates instead of allowing one', () => {
    const scenario = inFlight({ policy: { max_attempts: 1, consistency_window_ms: 0 } });
    scenario.submit(envelope(1, outcomeUnknown()));
    scenario.when(verified('not_found')).thenMovesTo('escalated');
  });

  it('an envelope that says escalate is terminal', () => {
    const scenario = inFlight();
    scenario.when(envelope(1, escalateNow())).thenMovesTo('escalated');
    expect(stateOf(scenario).directive.next_action).toBe('none');
    scenario.when(dispatched(2)).thenRefuses('STEP_ESCALATED');
  });
});

describe('decide: facts a step is not waiting for', () => {
  it('refuses a verification when none is pending (FACT_NOT_EXPECTED)', () => {
    planned1().when(verified('found_committed')).thenRefuses('FACT_NOT_EXPECTED');
    const done = inFlight();
    done.submit(envelope(1, success()));
    done.when(verified('not_found')).thenRefuses('FACT_NOT_EXPECTED');
  });

  it('refuses an approval when none is pending (FACT_NOT_EXPECTED)', () => {
    inFlight().when(approval('granted')).thenRefuses('FACT_NOT_EXPECTED');
  });
});

describe('decide: transitions carry when the from-state began', () => {
  it("sets from_since to the state's since, and none from unplanned", () => {
    const plan = given().when(planned(), at(0)).then(['StepPlanned', 'TransitionRecorded']);
    expect(plan.events[1].data).not.toHaveProperty('from_since');

    const scenario = planned1();
    scenario.submit(dispatched(1), at(1_000));
    const since = stateOf(scenario).since;
    expect(since).toBe(at(1_000));
    const unknown = scenario.when(envelope(1, outcomeUnknown()), at(5_000)).thenMovesTo('verifying');
    expect(unknown.events[1].data).toMatchObject({ from: 'dispatched', to: 'verifying', from_since: since });
    const resolved = scenario.when(verified('found_committed'), at(45_000)).thenMovesTo('succeeded');
    expect(resolved.events[1].data).toMatchObject({ from: 'verifying', from_since: at(5_000) });
  });

  it('sets it on the escalation a refused dispatch records, too', () => {
    const scenario = planned1({ policy: { max_attempts: 0 } });
    const decision = scenario.when(dispatched(1), at(2_000)).thenRefuses('ATTEMPTS_EXHAUSTED');
    expect(decision.events[1].data).toMatchObject({ from: 'planned', to: 'escalated', from_since: T0 });
  });
});

describe('decide: time is an argument', () => {
  it('gives the same decision for the same state, fact and now', () => {
    const state = inFlight().state;
    const command = { fact: envelope(1, rateLimited(at(5))), event_id: 'e-1', now: at(1) };
    expect(decide(state, command)).toEqual(decide(state, command));
    expect(isPlanned(state) && state.since).toBe(T0);
  });
});
