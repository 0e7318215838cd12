/**
 * Operator facts (docs/contract.md §4.10), each action against each state it meets: allowed where
 * the state allows it, refused 409 with a code naming the state otherwise, and nothing recorded
 * when refused.
 */
import { decide, type PlannedStep } from '@recovery-ledger/core';
import type { SubmittedFact } from '../../src/domain/events';
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

const manual = (outcome: 'found_committed' | 'not_found', evidence_ref?: string): SubmittedFact => ({
  type: 'OutcomeVerifiedManually',
  data: { outcome, note: 'checked the provider dashboard', ...(evidence_ref ? { evidence_ref } : {}) },
});
const cancel = (reason = 'customer withdrew the request'): SubmittedFact => ({
  type: 'StepCancelled',
  data: { reason },
});
const reopen = (attempts = 1, reason = 'provider fixed'): SubmittedFact => ({
  type: 'StepReopened',
  data: { attempts, reason },
});
const ack = (assignee = 'ana'): SubmittedFact => ({
  type: 'EscalationAcknowledged',
  data: { assignee, note: 'on it' },
});

const POLICY = { policy: { max_attempts: 2, consistency_window_ms: 1_000, dispatch_timeout_ms: 10_000 } };
const LATER = at(60_000);

/** Each state an operator meets, built by the facts a runtime submits. */
const states = {
  planned: () => scenarioOf([planned(POLICY)]),
  dispatched: () => scenarioOf([planned(POLICY), dispatched(1)]),
  verifying: () => scenarioOf([planned(POLICY), dispatched(1), envelope(1, outcomeUnknown())]),
  needs_input: () => scenarioOf([planned(POLICY), dispatched(1), envelope(1, invalidRecipient(1))]),
  retry_scheduled: () => scenarioOf([planned(POLICY), dispatched(1), envelope(1, rateLimited(at(30_000), 1))]),
  awaiting_approval: () => scenarioOf([planned(POLICY), dispatched(1), envelope(1, missingApproval())]),
  retry_ready: () =>
    scenarioOf([planned(POLICY), dispatched(1), envelope(1, outcomeUnknown())], [[verified('not_found'), at(20_000)]]),
  succeeded: () => scenarioOf([planned(POLICY), dispatched(1), envelope(1, success())]),
  escalated_known: () => scenarioOf([planned(POLICY), dispatched(1), envelope(1, escalateNow())]),
  escalated_unknown: () =>
    scenarioOf(
      [planned(POLICY), dispatched(1), envelope(1, outcomeUnknown())],
      [[verified('lookup_unavailable'), at(20_000)]],
    ),
  cancelled: () => scenarioOf([planned(POLICY), dispatched(1), envelope(1, invalidRecipient(1))], [[cancel(), T0]]),
};
type StateName = keyof typeof states;

function scenarioOf(facts: SubmittedFact[], timed: Array<[SubmittedFact, string]> = []) {
  const scenario = given();
  for (const fact of facts) scenario.submit(fact);
  for (const [fact, now] of timed) scenario.submit(fact, now);
  return scenario;
}

/** What each action answers in each state: a status it moves to (or `stays`), or a refusal code. */
const TABLE: Record<string, Record<StateName, string>> = {
  'verified manually, found': {
    planned: 'OUTCOME_KNOWN',
    dispatched: 'succeeded',
    verifying: 'succeeded',
    needs_input: 'OUTCOME_KNOWN',
    retry_scheduled: 'OUTCOME_KNOWN',
    awaiting_approval: 'OUTCOME_KNOWN',
    retry_ready: 'OUTCOME_KNOWN',
    succeeded: 'STEP_SUCCEEDED',
    escalated_known: 'OUTCOME_KNOWN',
    escalated_unknown: 'succeeded',
    cancelled: 'STEP_CANCELLED',
  },
  'verified manually, not found': {
    planned: 'OUTCOME_KNOWN',
    dispatched: 'retry_ready',
    verifying: 'retry_ready',
    needs_input: 'OUTCOME_KNOWN',
    retry_scheduled: 'OUTCOME_KNOWN',
    awaiting_approval: 'OUTCOME_KNOWN',
    retry_ready: 'OUTCOME_KNOWN',
    succeeded: 'STEP_SUCCEEDED',
    escalated_known: 'OUTCOME_KNOWN',
    escalated_unknown: 'retry_ready',
    cancelled: 'STEP_CANCELLED',
  },
  cancel: {
    planned: 'cancelled',
    dispatched: 'OUTCOME_UNVERIFIED',
    verifying: 'OUTCOME_UNVERIFIED',
    needs_input: 'cancelled',
    retry_scheduled: 'cancelled',
    awaiting_approval: 'cancelled',
    retry_ready: 'cancelled',
    succeeded: 'STEP_SUCCEEDED',
    escalated_known: 'cancelled',
    escalated_unknown: 'OUTCOME_UNVERIFIED',
    cancelled: 'STEP_CANCELLED',
  },
  reopen: {
    planned: 'STEP_NOT_ESCALATED',
    dispatched: 'STEP_NOT_ESCALATED',
    verifying: 'STEP_NOT_ESCALATED',
    needs_input: 'STEP_NOT_ESCALATED',
    retry_scheduled: 'STEP_NOT_ESCALATED',
    awaiting_approval: 'STEP_NOT_ESCALATED',
    retry_ready: 'STEP_NOT_ESCALATED',
    succeeded: 'STEP_SUCCEEDED',
    escalated_known: 'retry_ready',
    escalated_unknown: 'OUTCOME_UNVERIFIED',
    cancelled: 'STEP_CANCELLED',
  },
  acknowledge: {
    planned: 'STEP_NOT_ESCALATED',
    dispatched: 'STEP_NOT_ESCALATED',
    verifying: 'STEP_NOT_ESCALATED',
    needs_input: 'STEP_NOT_ESCALATED',
    retry_scheduled: 'STEP_NOT_ESCALATED',
    awaiting_approval: 'STEP_NOT_ESCALATED',
    retry_ready: 'STEP_NOT_ESCALATED',
    succeeded: 'STEP_SUCCEEDED',
    escalated_known: 'stays',
    escalated_unknown: 'stays',
    cancelled: 'STEP_CANCELLED',
  },
};

const ACTIONS: Record<string, SubmittedFact> = {
  'verified manually, found': manual('found_committed', 'inv_9'),
  'verified manually, not found': manual('not_found'),
  cancel: cancel(),
  reopen: reopen(2),
  acknowledge: ack(),
};

describe('decide: operator facts, every action in every state', () => {
  const cases = Object.entries(TABLE).flatMap(([action, row]) =>
    Object.entries(row).map(([state, expected]) => [action, state, expected] as const),
  );
  it.each(cases)('%s in %s: %s', (action, state, expected) => {
    const scenario = states[state as StateName]();
    const before = scenario.events.length;
    const decision = scenario.submit(ACTIONS[action], LATER);
    if (/^[A-Z_]+$/.test(expected)) {
      expect(decision).toMatchObject({ kind: 'refused', code: expected, events: [] });
      expect(scenario.events.length).toBe(before);
      return;
    }
    expect(decision.kind).toBe('accepted');
    expect(decision.events[0]).toEqual(ACTIONS[action]);
    const moved = decision.events.find((event) => event.type === 'TransitionRecorded');
    if (expected === 'stays') expect(moved).toBeUndefined();
    else expect(moved?.data).toMatchObject({ to: expected });
  });
});

describe('decide: operator facts, the rules behind the table', () => {
  it('a manual verification of a dispatch still inside its dispatch timeout is refused ATTEMPT_IN_FLIGHT', () => {
    states.dispatched().when(manual('found_committed', 'inv_9'), at(5_000)).thenRefuses('ATTEMPT_IN_FLIGHT');
  });

  it('a manual not_found inside the consistency window after the last reach is refused VERIFICATION_PREMATURE, with its not_before', () => {
    const scenario = scenarioOf([planned(POLICY), dispatched(1)], [[envelope(1, outcomeUnknown()), at(2_000)]]);
    const refused = scenario.when(manual('not_found'), at(2_500)).thenRefuses('VERIFICATION_PREMATURE');
    expect(refused.directive.not_before).toBe(at(3_000));
    scenario.when(manual('not_found'), at(3_000)).thenMovesTo('retry_ready');
  });

  it('a manual found_committed proves the success with the evidence and the person, counted apart', () => {
    const scenario = states.verifying();
    scenario.when(manual('found_committed', 'inv_9'), LATER).thenMovesTo('succeeded');
    const state = scenario.state as PlannedStep;
    expect(state.success).toMatchObject({ attempt: 1, proven_by: 'manual_verification', evidence_ref: 'inv_9' });
    expect(state.last_verification).toMatchObject({ outcome: 'found_committed', manual: true });
    // and a later dispatch answers the original success
    expect(scenario.submit(dispatched(2), LATER).kind).toBe('replayed');
  });

  it('a cancelled step refuses every later dispatch STEP_CANCELLED and records the refusal', () => {
    const scenario = states.needs_input();
    scenario.when(cancel('refund no longer wanted'), LATER).thenMovesTo('cancelled');
    const refused = scenario.when(dispatched(2, 'sha256:input-2'), LATER).thenRefuses('STEP_CANCELLED');
    expect(refused.directive).toEqual({ next_action: 'none', attempts_remaining: 0 });
    expect(refused.events.map((event) => event.type)).toEqual(['DispatchRefused']);
    scenario.when(approval('granted'), LATER).thenRefuses('FACT_NOT_EXPECTED');
  });

  it('a reopen grants exactly the budget it names, and the step escalates again when it is spent', () => {
    const scenario = scenarioOf([
      planned({ policy: { max_attempts: 1, consistency_window_ms: 0 } }),
      dispatched(1),
      envelope(1, rateLimited(at(0), 3)),
    ]);
    expect(scenario.state.status).toBe('escalated');
    scenario.when(dispatched(2), LATER).thenRefuses('ATTEMPTS_EXHAUSTED');
    const reopened = scenario.when(reopen(1, 'limit raised'), LATER).thenMovesTo('retry_ready');
    expect((reopened.events[1].data as { directive: unknown }).directive).toEqual({
      next_action: 'dispatch',
      attempts_remaining: 1,
    });
    scenario.when(dispatched(2), LATER).thenMovesTo('dispatched');
    scenario.when(envelope(2, rateLimited(at(0), 3)), LATER).thenMovesTo('escalated');
    scenario.when(dispatched(3), LATER).thenRefuses('ATTEMPTS_EXHAUSTED');
  });

  it('a reopened step whose last envelope asked for a corrected input still refuses that input unchanged', () => {
    const scenario = scenarioOf([
      planned({ policy: { max_attempts: 1 } }),
      dispatched(1),
      envelope(1, invalidRecipient(1)),
    ]);
    expect(scenario.state.status).toBe('escalated');
    scenario.when(reopen(1), LATER).thenMovesTo('needs_input');
    scenario.when(dispatched(2), LATER).thenRefuses('UNCHANGED_RETRY');
    scenario.when(dispatched(2, 'sha256:input-2'), LATER).thenMovesTo('dispatched');
  });

  it('a reopened step that was denied an approval still needs one for its input', () => {
    const scenario = states.awaiting_approval();
    scenario.when(approval('denied'), LATER).thenMovesTo('escalated');
    // It waits for an approver, so the work feed does not hand it out to be refused.
    scenario.when(reopen(1), LATER).thenMovesTo('awaiting_approval');
    scenario.when(dispatched(2), LATER).thenRefuses('APPROVAL_REQUIRED');
    expect(scenario.state.status).toBe('awaiting_approval');
  });

  it('a denial revokes the earlier grant of the same input: a reopen asks for it again, nothing dispatches it', () => {
    // Granted, dispatched, the provider asks again, the approver denies, an operator reopens (§4.4, §4.10).
    const scenario = states.awaiting_approval();
    scenario.when(approval('granted'), LATER).thenMovesTo('retry_ready');
    scenario.when(dispatched(2), LATER).thenMovesTo('dispatched');
    scenario.when(envelope(2, missingApproval()), LATER).thenMovesTo('awaiting_approval');
    scenario.when(approval('denied'), LATER).thenMovesTo('escalated');
    scenario.when(reopen(1), LATER);
    scenario.when(dispatched(3), LATER).thenRefuses('APPROVAL_REQUIRED');
    expect(scenario.state).toMatchObject({
      status: 'awaiting_approval',
      approval: 'pending',
      approval_input_hash: 'sha256:input-1',
    });
    scenario.when(approval('granted'), LATER).thenMovesTo('retry_ready');
    scenario.when(dispatched(3), LATER).thenMovesTo('dispatched');
  });

  it('a provider that asks again for an input already granted spends that grant', () => {
    const scenario = states.awaiting_approval();
    scenario.when(approval('granted'), LATER).thenMovesTo('retry_ready');
    scenario.when(dispatched(2), LATER).thenMovesTo('dispatched');
    scenario.when(envelope(2, missingApproval()), LATER).thenMovesTo('awaiting_approval');
    expect((scenario.state as PlannedStep).approved_input_hashes ?? []).not.toContain('sha256:input-1');
  });

  it('the approval asked for a corrected input names that input, as its dispatch recorded it (§4.4)', () => {
    const corrected = { amount_cents: 99_900 };
    const withInput: SubmittedFact = {
      type: 'AttemptDispatched',
      data: { attempt: 2, input_hash: 'sha256:input-2', input: corrected },
    };
    const scenario = scenarioOf([
      planned({ policy: { max_attempts: 4 }, input: { amount_cents: 100 } }),
      dispatched(1),
      envelope(1, invalidRecipient(3)),
    ]);
    scenario.when(withInput, LATER).thenMovesTo('dispatched');
    scenario.when(envelope(2, rateLimited(at(0), 2)), LATER).thenMovesTo('retry_scheduled');
    // The retry sends the hash alone: the input recorded for that hash still stands.
    scenario.when(dispatched(3, 'sha256:input-2'), LATER).thenMovesTo('dispatched');
    scenario.when(envelope(3, missingApproval()), LATER).thenMovesTo('awaiting_approval');
    expect(scenario.state).toMatchObject({ approval_input_hash: 'sha256:input-2', approval_input: corrected });
  });

  it('an acknowledgement keeps the step escalated, records who has it, and the next transition clears it', () => {
    const scenario = states.escalated_known();
    scenario.when(ack('ana'), LATER).then(['EscalationAcknowledged']);
    const state = scenario.state as PlannedStep;
    expect(state.status).toBe('escalated');
    expect(state.acknowledged).toEqual({ assignee: 'ana', note: 'on it', at: LATER });
    scenario.when(reopen(1), LATER).thenMovesTo('retry_ready');
    expect((scenario.state as PlannedStep).acknowledged).toBeUndefined();
  });

  it('a second acknowledgement naming someone else is refused ESCALATION_ALREADY_ACKNOWLEDGED unless it says reassign', () => {
    const scenario = states.escalated_known();
    scenario.when(ack('ana'), LATER).then(['EscalationAcknowledged']);
    const refused = scenario.when(ack('bo'), LATER).thenRefuses('ESCALATION_ALREADY_ACKNOWLEDGED');
    expect(refused.detail).toContain('ana');
    expect((scenario.state as PlannedStep).acknowledged?.assignee).toBe('ana');
    // The same person again only updates the note; a reassignment says so and is recorded.
    scenario.when(ack('ana'), LATER).then(['EscalationAcknowledged']);
    const reassign: SubmittedFact = { type: 'EscalationAcknowledged', data: { assignee: 'bo', reassign: true } };
    scenario.when(reassign, LATER).then(['EscalationAcknowledged']);
    expect((scenario.state as PlannedStep).acknowledged?.assignee).toBe('bo');
  });

  it('an operator fact before the plan is refused STEP_NOT_PLANNED', () => {
    for (const fact of Object.values(ACTIONS))
      expect(decide({ status: 'unplanned' }, { fact, event_id: 'e', now: T0 })).toMatchObject({
        kind: 'refused',
        code: 'STEP_NOT_PLANNED',
      });
  });
});
