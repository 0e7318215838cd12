/**
 * Property tests over random fact sequences: whatever a runtime submits, in whatever
 * order, the decider never lets a write be dispatched again while its outcome is unrecorded or
 * unknown and unverified; evolve is total; folding all at once equals folding one by one.
 */
import fc from 'fast-check';
import {
  decide,
  evolve,
  fold,
  initialState,
  type RecordedEvent,
  type StepState,
  type SubmittedFact,
  type ToolEnvelope,
} from '@recovery-ledger/core';
import {
  at,
  invalidRecipient,
  missingApproval,
  outcomeUnknown,
  planned,
  rateLimited,
  success,
  escalateNow,
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

const facts: fc.Arbitrary<SubmittedFact> = fc.oneof(
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 1, max: 4 })
      .map((n) => planned({ policy: { max_attempts: n, consistency_window_ms: 1000 } })),
  },
  {
    weight: 4,
    arbitrary: fc
      .tuple(
        fc.integer({ min: 1, max: 6 }),
        fc.constantFrom('h1', 'h2', 'h3'),
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
    weight: 4,
    arbitrary: fc
      .tuple(fc.integer({ min: 1, max: 6 }), envelopes)
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
          const folded = fold(
            decision.events.map(
              (event, n) => ({ ...event, event_id: `e${index}.${n}`, recorded_at: now }) as RecordedEvent,
            ),
            state,
          );
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

  it('grants a new attempt after an unknown outcome only once the last one could no longer reach the provider', () => {
    fc.assert(
      fc.property(histories, (steps) => {
        const { events } = run(steps);
        const plan = events.find((e) => e.type === 'StepPlanned');
        if (!plan || plan.type !== 'StepPlanned') return;
        const window = plan.data.policy.consistency_window_ms;
        // The previous attempt: when it may last reach the provider, and whether a not_found cleared it.
        let lastReach: number | undefined;
        let knownNotCommitted = true;
        let clearedByNotFound = false;
        for (const event of events) {
          const time = Date.parse(event.recorded_at);
          if (event.type === 'AttemptDispatched') {
            if (lastReach !== undefined && !knownNotCommitted) expect(clearedByNotFound).toBe(true);
            lastReach = Date.parse(event.data.call_deadline ?? '');
            expect(lastReach).toBeGreaterThanOrEqual(time);
            knownNotCommitted = false;
            clearedByNotFound = false;
          }
          if (event.type === 'EnvelopeRecorded' && lastReach !== undefined) {
            lastReach = Math.min(lastReach, time);
            knownNotCommitted = !event.data.envelope.ok && event.data.envelope.commit_state === 'not_committed';
          }
          if (event.type === 'VerificationRecorded' && event.data.outcome === 'not_found' && lastReach !== undefined) {
            // The one way past an unknown outcome: conclusive only a window after the last reach.
            expect(time).toBeGreaterThanOrEqual(lastReach + window);
            clearedByNotFound = true;
          }
        }
      }),
      { numRuns: 2000, seed: 17 },
    );
  });

  it('once a step asked for approval, runs only inputs an approver granted', () => {
    fc.assert(
      fc.property(histories, (steps) => {
        // Every history starts at a request for approval of h1, so the rest works on that.
        const askedFor: Array<[SubmittedFact, number]> = [
          [planned({ policy: { max_attempts: 4, consistency_window_ms: 1000 } }), 0],
          [{ type: 'AttemptDispatched', data: { attempt: 1, input_hash: 'h1' } }, 0],
          [{ type: 'EnvelopeRecorded', data: { attempt: 1, envelope: missingApproval(), redactions: [] } }, 0],
        ];
        const { events } = run([...askedFor, ...steps]);
        let asked = false;
        const approved = new Set<string>();
        for (const event of events) {
          if (
            event.type === 'EnvelopeRecorded' &&
            !event.data.envelope.ok &&
            event.data.envelope.next_action === 'request_approval'
          )
            asked = true;
          if (event.type === 'ApprovalRecorded' && event.data.decision === 'granted' && event.data.input_hash)
            approved.add(event.data.input_hash);
          if (event.type === 'AttemptDispatched' && asked) expect(approved.has(event.data.input_hash)).toBe(true);
        }
      }),
      { numRuns: 2000, seed: 19 },
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
      type: fc.oneof(
        fc.constantFrom('StepPlanned', 'AttemptDispatched', 'EnvelopeRecorded', 'TransitionRecorded', 'SomethingNew'),
        fc.string(),
      ),
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
