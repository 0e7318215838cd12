import { decide, type Decision, type SubmittedFact, type WindowClock } from '@recovery-ledger/core';
import { at, dispatched, envelope, given, nextId, planned, rateLimited, verified } from '../support/given';

/**
 * Windows judged by an instance whose clock may be ahead of the one that started them
 * (docs/contract.md §4, "Time"): closed only a margin after their end, and never judged closed
 * while the instances' clocks cannot be compared.
 */
const policy = { dispatch_timeout_ms: 1_000, consistency_window_ms: 1_000 };
const MARGIN: WindowClock = { margin_ms: 900 };
const SKEW: WindowClock = { unbounded: 'skew' };

const manual = (outcome: 'found_committed' | 'not_found'): SubmittedFact => ({
  type: 'OutcomeVerifiedManually',
  data: { outcome, note: 'checked the provider dashboard' },
});

/** Attempt 1 dispatched at 0 by another instance: its not_found window ends at 2,000 ms by that clock. */
function inFlight() {
  const scenario = given();
  scenario.submit(planned({ policy }));
  scenario.submit(dispatched(1));
  return scenario;
}

function judged(scenario: ReturnType<typeof given>, fact: SubmittedFact, now: string, clock?: WindowClock): Decision {
  return decide(scenario.state, { fact, event_id: nextId(), now, ...(clock ? { window_clock: clock } : {}) });
}

describe('decide: a window judged on a clock that may be ahead', () => {
  it('a not_found closes the window only the margin after its end, and says when', () => {
    const scenario = inFlight();
    const early = judged(scenario, verified('not_found'), at(2_899), MARGIN);
    expect(early).toMatchObject({
      kind: 'refused',
      code: 'VERIFICATION_PREMATURE',
      directive: { next_action: 'verify_operation', not_before: at(2_900) },
      events: [],
    });
    expect(judged(scenario, verified('not_found'), at(2_900), MARGIN).kind).toBe('accepted');
    // Without a margin (one instance) the window closes at its end, as before.
    expect(judged(scenario, verified('not_found'), at(2_000)).kind).toBe('accepted');
  });

  it('a manual verification of a dispatched attempt waits the margin after its dispatch timeout', () => {
    const scenario = inFlight();
    const early = judged(scenario, manual('found_committed'), at(1_899), MARGIN);
    expect(early).toMatchObject({ kind: 'refused', code: 'ATTEMPT_IN_FLIGHT' });
    if (early.kind === 'refused') expect(early.detail).toContain(at(1_900));
    expect(judged(scenario, manual('found_committed'), at(1_900), MARGIN).kind).toBe('accepted');
  });

  it('clocks that cannot be compared: a window past by this clock is not taken as closed, and nothing is recorded', () => {
    const scenario = inFlight();
    for (const fact of [verified('not_found'), manual('not_found'), manual('found_committed')]) {
      const refused = judged(scenario, fact, at(3_600_000), SKEW);
      expect(refused).toMatchObject({ kind: 'refused', code: 'CLOCK_SKEW_UNBOUNDED', events: [] });
    }
    const unjudged = judged(scenario, verified('not_found'), at(3_600_000), { unbounded: 'unjudged' });
    expect(unjudged).toMatchObject({ kind: 'refused', code: 'CLOCK_SKEW_UNBOUNDED' });
    if (unjudged.kind === 'refused') expect(unjudged.detail).toMatch(/not compared yet/);
    // Still open by this clock: premature, as on one instance.
    expect(judged(scenario, verified('not_found'), at(1_500), SKEW)).toMatchObject({
      code: 'VERIFICATION_PREMATURE',
      directive: { not_before: at(2_000) },
    });
  });

  it('decisions that need no window to have closed are taken whatever the clocks', () => {
    const scenario = inFlight();
    expect(judged(scenario, verified('found_committed'), at(10), SKEW).kind).toBe('accepted');
    expect(judged(scenario, verified('lookup_unavailable'), at(10), SKEW).kind).toBe('accepted');
    const fresh = given();
    fresh.submit(planned({ policy }));
    expect(judged(fresh, dispatched(1), at(0), SKEW).kind).toBe('accepted');
  });

  it('a retry after not_before: not widened by the margin, refused unrecorded while the clocks cannot be compared', () => {
    const scenario = inFlight();
    scenario.submit(envelope(1, rateLimited(at(30_000))));
    expect(judged(scenario, dispatched(2), at(29_999), MARGIN)).toMatchObject({ code: 'RETRY_NOT_BEFORE' });
    expect(judged(scenario, dispatched(2), at(30_000), MARGIN).kind).toBe('accepted');
    expect(judged(scenario, dispatched(2), at(30_000), SKEW)).toMatchObject({
      kind: 'refused',
      code: 'CLOCK_SKEW_UNBOUNDED',
      events: [],
    });
  });
});
