/**
 * Property tests over random fact sequences: whatever a runtime submits, in whatever
 * order, the decider never lets a write be dispatched again while its outcome is unrecorded or
 * unknown and unverified; evolve is total; folding all at once equals folding one by one.
 */
import fc from 'fast-check';
import { decide, evolve, fold, initialState, type StepState } from '../../../src/domain/decider';
import type { RecordedEvent, SubmittedFact } from '../../../src/domain/events';
import type { ToolEnvelope } from '../../../src/domain/envelope/envelope.types';
import { at, invalidRecipient, missingApproval, outcomeUnknown, planned, rateLimited, success, escalateNow } from '../../support/given';

const envelopes: fc.Arbitrary<ToolEnvelope> = fc.oneof(
  fc.constant(success()),
  fc.constant(outcomeUnknown()),
  fc.integer({ min: 0, max: 3 }).map((n) => invalidRecipient(n)),
  fc.tuple(fc.integer({ min: 0, max: 60_000 }), fc.integer({ min: 0, max: 3 })).map(([ms, n]) => rateLimited(at(ms), n)),
  fc.constant(missingApproval()),
  fc.constant(escalateNow()),
);

const facts: fc.Arbitrary<SubmittedFact> = fc.oneof(
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 4 }).map((n) => planned({ policy: { max_attempts: n, consistency_window_ms: 1000 } })) },
  {
    weight: 4,
    arbitrary: fc
      .tuple(fc.integer({ min: 1, max: 6 }), fc.constantFrom('h1', 'h2', 'h3'))
      .map(([attempt, hash]) => ({ type: 'AttemptDispatched', data: { attempt, input_hash: hash } }) as SubmittedFact),
  },
  {
    weight: 4,
    arbitrary: fc
      .tuple(fc.integer({ min: 1, max: 6 }), envelopes)
      .map(([attempt, envelope]) => ({ type: 'EnvelopeRecorded', data: { attempt, envelope, redactions: [] } }) as SubmittedFact),
  },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom('found_committed', 'not_found', 'lookup_unavailable')
      .map((outcome) => ({ type: 'VerificationRecorded', data: { outcome, checked_at: at(0), redactions: [] } }) as SubmittedFact),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('granted', 'denied')
      .map((decision) => ({ type: 'ApprovalRecorded', data: { decision, approver: 'a' } }) as SubmittedFact),
  },
);

/** Each step: a fact and how far the ledger clock moved before it. */
const histories = fc.array(fc.tuple(facts, fc.integer({ min: 0, max: 20_000 })), { maxLength: 40 });

function run(steps: Array<[SubmittedFact, number]>): { events: RecordedEvent[]; states: StepState[] } {
  let state = initialState();
  let clock = 0;
  const events: RecordedEvent[] = [];
  const states: StepState[] = [];
  steps.forEach(([fact, advance], index) => {
    clock += advance;
    const now = at(clock);
    const decision = decide(state, { fact, event_id: `e${index}`, now });
    decision.events.forEach((event, n) => {
      const stored = { ...event, event_id: `e${index}.${n}`, recorded_at: now } as RecordedEvent;
      events.push(stored);
      state = evolve(state, stored);
    });
    states.push(state);
  });
  return { events, states };
}

describe('decide: properties', () => {
  it('hands back the state its events fold to, so the ledger never folds them again', () => {
    fc.assert(
      fc.property(histories, (steps) => {
        let state = initialState();
        let clock = 0;
        steps.forEach(([fact, advance], index) => {
          clock += advance;
          const now = at(clock);
          const decision = decide(state, { fact, event_id: `e${index}`, now });
          const folded = fold(decision.events.map((event, n) => ({ ...event, event_id: `e${index}.${n}`, recorded_at: now }) as RecordedEvent), state);
          expect(decision.state).toEqual(folded);
          if (decision.kind !== 'refused' || decision.events.length > 0) state = decision.state;
        });
      }),
      { numRuns: 1000, seed: 7 },
    );
  });

  it('never grants a write dispatch while the last one has no recorded outcome or an unverified unknown', () => {
    fc.assert(
      fc.property(histories, (steps) => {
        const { events } = run(steps);
        let blocked = false; // an attempt is in flight, or its outcome is unknown and unverified
        for (const event of events) {
          if (event.type === 'AttemptDispatched') {
            expect(blocked).toBe(false);
            blocked = true;
          }
          if (event.type === 'EnvelopeRecorded') {
            const unknown = !event.data.envelope.ok && event.data.envelope.commit_state === 'unknown';
            blocked = unknown;
          }
          if (event.type === 'VerificationRecorded') blocked = false;
        }
      }),
      { numRuns: 2000, seed: 42 },
    );
  });

  it('never dispatches after success: the stream holds no AttemptDispatched after the succeeded transition', () => {
    fc.assert(
      fc.property(histories, (steps) => {
        const { events } = run(steps);
        const succeededAt = events.findIndex((e) => e.type === 'TransitionRecorded' && e.data.to === 'succeeded');
        if (succeededAt < 0) return;
        expect(events.slice(succeededAt).some((e) => e.type === 'AttemptDispatched')).toBe(false);
      }),
      { numRuns: 1000, seed: 7 },
    );
  });

  it('never exceeds the policy bound of attempts', () => {
    fc.assert(
      fc.property(histories, (steps) => {
        const { events } = run(steps);
        const plan = events.find((e) => e.type === 'StepPlanned');
        if (!plan || plan.type !== 'StepPlanned') return;
        const dispatches = events.filter((e) => e.type === 'AttemptDispatched').length;
        expect(dispatches).toBeLessThanOrEqual(plan.data.policy.max_attempts);
      }),
      { numRuns: 1000, seed: 11 },
    );
  });

  it('folding all at once equals folding one by one, and evolve never throws', () => {
    fc.assert(
      fc.property(histories, (steps) => {
        const { events, states } = run(steps);
        expect(fold(events)).toEqual(states.length ? states[states.length - 1] : initialState());
        let incremental = initialState();
        for (const event of events) incremental = evolve(incremental, event);
        expect(incremental).toEqual(fold(events));
      }),
      { numRuns: 1000, seed: 3 },
    );
  });

  it('evolve is total on arbitrary events, known or not', () => {
    const anyEvent = fc.record({
      type: fc.oneof(fc.constantFrom('StepPlanned', 'AttemptDispatched', 'EnvelopeRecorded', 'TransitionRecorded', 'SomethingNew'), fc.string()),
      data: fc.oneof(fc.object(), fc.constant({})),
      event_id: fc.string(),
      recorded_at: fc.constant(at(0)),
    });
    fc.assert(
      fc.property(fc.array(anyEvent, { maxLength: 20 }), (events) => {
        const base = run([[planned(), 0]]).events;
        expect(() => fold([...base, ...(events as unknown as RecordedEvent[])])).not.toThrow();
      }),
      { numRuns: 1000, seed: 5 },
    );
  });
});
