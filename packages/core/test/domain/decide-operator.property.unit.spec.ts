/**
 * Property tests over random fact sequences with operator facts mixed in (docs/contract.md §4.10):
 * whatever a runtime and a person submit, in whatever order and at whatever times, no dispatch is
 * granted while an earlier attempt's outcome is unknown and unverified, a not_found (a person's
 * or a lookup's) clears one only a consistency window after the attempt's last reach, a cancelled
 * step never dispatches, and the attempts stay within the plan plus what reopens granted.
 */
import fc from 'fast-check';
import { decide, evolve, fold, initialState, isPlanned, type StepState } from '@recovery-ledger/core';
import type { RecordedEvent, SubmittedFact } from '../../src/domain/events';
import type { ToolEnvelope } from '../../src/domain/envelope/envelope.types';
import {
  at,
  escalateNow,
  invalidRecipient,
  missingApproval,
  outcomeUnknown,
  planned,
  rateLimited,
  success,
} from '../support/given';

const envelopes: fc.Arbitrary<ToolEnvelope> = fc.oneof(
  fc.constant(success()),
  fc.constant(outcomeUnknown()),
  fc.integer({ min: 0, max: 3 }).map((n) => invalidRecipient(n)),
  fc
    .tuple(fc.integer({ min: 0, max: 60_000 }), fc.integer({ min: 0, max: 3 }))
    .map(([ms, n]) => rateLimited(at(ms), n)),
  fc.constant(missingApproval()),
  fc.constant(escalateNow()),
);

/**
 * An attempt number: 0 stands for "the next one" and -1 for "the current one", resolved against
 * the state when the fact is decided, so random histories reach the deep states (an escalated
 * unknown outcome, a reopened step) instead of being refused ATTEMPT_MISMATCH at the first step.
 */
const attemptNumbers = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(0, -1) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 8 }) },
);

function resolveAttempt(fact: SubmittedFact, state: StepState): SubmittedFact {
  if (fact.type !== 'AttemptDispatched' && fact.type !== 'EnvelopeRecorded') return fact;
  const used = isPlanned(state) ? state.attempts_used : 0;
  const attempt = fact.data.attempt === 0 ? used + 1 : fact.data.attempt === -1 ? Math.max(1, used) : fact.data.attempt;
  return { ...fact, data: { ...fact.data, attempt } } as SubmittedFact;
}

const runtimeFacts: fc.Arbitrary<SubmittedFact> = fc.oneof(
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 1, max: 3 })
      .map((n) => planned({ policy: { max_attempts: n, consistency_window_ms: 1000, dispatch_timeout_ms: 5000 } })),
  },
  {
    weight: 4,
    arbitrary: fc
      .tuple(
        attemptNumbers,
        fc.constantFrom('h1', 'h2'),
        fc.option(fc.integer({ min: 1, max: 90_000 }), { nil: undefined }),
      )
      .map(
        ([attempt, hash, window]) =>
          ({
            type: 'AttemptDispatched',
            data: { attempt, input_hash: hash, ...(window === undefined ? {} : { call_window_ms: window }) },
          }) as SubmittedFact,
      ),
  },
  {
    weight: 3,
    arbitrary: fc
      .tuple(attemptNumbers, envelopes)
      .map(
        ([attempt, envelope]) =>
          ({ type: 'EnvelopeRecorded', data: { attempt, envelope, redactions: [] } }) as SubmittedFact,
      ),
  },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom('found_committed', 'not_found', 'lookup_unavailable')
      .map(
        (outcome) =>
          ({ type: 'VerificationRecorded', data: { outcome, checked_at: at(0), redactions: [] } }) as SubmittedFact,
      ),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('granted', 'denied')
      .map((decision) => ({ type: 'ApprovalRecorded', data: { decision, approver: 'a' } }) as SubmittedFact),
  },
);

const operatorFacts: fc.Arbitrary<SubmittedFact> = fc.oneof(
  fc.constantFrom('found_committed', 'not_found').map(
    (outcome) =>
      ({
        type: 'OutcomeVerifiedManually',
        data: { outcome, note: 'n', ...(outcome === 'found_committed' ? { evidence_ref: 'inv_9' } : {}) },
      }) as SubmittedFact,
  ),
  fc.constant({ type: 'StepCancelled', data: { reason: 'r' } } as SubmittedFact),
  fc
    .integer({ min: 1, max: 3 })
    .map((attempts) => ({ type: 'StepReopened', data: { attempts, reason: 'r' } }) as SubmittedFact),
  fc.constant({ type: 'EscalationAcknowledged', data: { assignee: 'ana' } } as SubmittedFact),
);

const facts = fc.oneof({ weight: 3, arbitrary: runtimeFacts }, { weight: 2, arbitrary: operatorFacts });
/** How far the ledger clock moves before a fact: often not at all, sometimes inside a window, sometimes past it. */
const advances = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 1_500 }), fc.integer({ min: 1_500, max: 8_000 }));
/** Every history starts with a plan (its bound random), so the facts after it are decided, not refused STEP_NOT_PLANNED. */
const plans = fc
  .integer({ min: 1, max: 3 })
  .map((n) => planned({ policy: { max_attempts: n, consistency_window_ms: 1000, dispatch_timeout_ms: 5000 } }));
const histories = fc
  .tuple(plans, fc.array(fc.tuple(facts, advances), { maxLength: 50 }))
  .map(([plan, rest]): Array<[SubmittedFact, number]> => [[plan, 0], ...rest]);

function run(steps: Array<[SubmittedFact, number]>): { events: RecordedEvent[]; states: StepState[] } {
  let state = initialState();
  let clock = 0;
  const events: RecordedEvent[] = [];
  const states: StepState[] = [];
  steps.forEach(([fact, advance], index) => {
    clock += advance;
    const now = at(clock);
    const decision = decide(state, { fact: resolveAttempt(fact, state), event_id: `e${index}`, now });
    decision.events.forEach((event, n) => {
      const stored = { ...event, event_id: `e${index}.${n}`, recorded_at: now } as RecordedEvent;
      events.push(stored);
      state = evolve(state, stored);
    });
    states.push(state);
  });
  return { events, states };
}

describe('decide with operator facts: properties', () => {
  it('never grants a dispatch while an earlier attempt has no outcome, or an unknown one nobody verified', () => {
    fc.assert(
      fc.property(histories, (steps) => {
        const { events } = run(steps);
        let blocked = false;
        for (const event of events) {
          if (event.type === 'AttemptDispatched') {
            expect(blocked).toBe(false);
            blocked = true;
          }
          if (event.type === 'EnvelopeRecorded')
            blocked = !event.data.envelope.ok && event.data.envelope.commit_state === 'unknown';
          // Only a conclusive lookup clears it: lookup_unavailable leaves it unknown.
          if (event.type === 'VerificationRecorded' && event.data.outcome !== 'lookup_unavailable') blocked = false;
          if (event.type === 'OutcomeVerifiedManually') blocked = false;
        }
      }),
      { numRuns: 3000, seed: 42 },
    );
  });

  it("a person's not_found, like a lookup's, clears an attempt only a consistency window after its last reach", () => {
    fc.assert(
      fc.property(histories, (steps) => {
        const { events } = run(steps);
        const plan = events.find((e) => e.type === 'StepPlanned');
        if (!plan || plan.type !== 'StepPlanned') return;
        const window = plan.data.policy.consistency_window_ms;
        let lastReach: number | undefined;
        for (const event of events) {
          const time = Date.parse(event.recorded_at);
          if (event.type === 'AttemptDispatched') lastReach = Date.parse(event.data.call_deadline ?? '');
          if (event.type === 'EnvelopeRecorded' && lastReach !== undefined) lastReach = Math.min(lastReach, time);
          const notFound =
            (event.type === 'OutcomeVerifiedManually' || event.type === 'VerificationRecorded') &&
            event.data.outcome === 'not_found';
          if (notFound && lastReach !== undefined) expect(time).toBeGreaterThanOrEqual(lastReach + window);
        }
      }),
      { numRuns: 3000, seed: 17 },
    );
  });

  it('a cancelled step never dispatches again, and a succeeded one never does either', () => {
    fc.assert(
      fc.property(histories, (steps) => {
        const { events } = run(steps);
        const ended = events.findIndex(
          (e) => e.type === 'TransitionRecorded' && (e.data.to === 'cancelled' || e.data.to === 'succeeded'),
        );
        if (ended < 0) return;
        expect(events.slice(ended).some((e) => e.type === 'AttemptDispatched')).toBe(false);
      }),
      { numRuns: 2000, seed: 7 },
    );
  });

  it("dispatches stay within the plan's bound plus the attempts reopens granted", () => {
    fc.assert(
      fc.property(histories, (steps) => {
        const { events } = run(steps);
        const plan = events.find((e) => e.type === 'StepPlanned');
        if (!plan || plan.type !== 'StepPlanned') return;
        let bound = plan.data.policy.max_attempts;
        let used = 0;
        for (const event of events) {
          if (event.type === 'StepReopened') bound = used + event.data.attempts;
          if (event.type === 'AttemptDispatched') used += 1;
          expect(used).toBeLessThanOrEqual(bound);
        }
      }),
      { numRuns: 2000, seed: 11 },
    );
  });

  it('hands back the state its events fold to, and folding all at once equals folding one by one', () => {
    fc.assert(
      fc.property(histories, (steps) => {
        let state = initialState();
        let clock = 0;
        steps.forEach(([fact, advance], index) => {
          clock += advance;
          const now = at(clock);
          const decision = decide(state, { fact: resolveAttempt(fact, state), event_id: `e${index}`, now });
          const folded = fold(
            decision.events.map(
              (event, n) => ({ ...event, event_id: `e${index}.${n}`, recorded_at: now }) as RecordedEvent,
            ),
            state,
          );
          expect(decision.state).toEqual(folded);
          if (decision.kind !== 'refused' || decision.events.length > 0) state = decision.state;
        });
        const { events, states } = run(steps);
        expect(fold(events)).toEqual(states.length ? states[states.length - 1] : initialState());
      }),
      { numRuns: 1000, seed: 3 },
    );
  });
});
