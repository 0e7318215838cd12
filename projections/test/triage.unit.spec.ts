import { DEFAULT_POLICY } from '@recovery-ledger/core';
import type { StepStateDoc } from '../src/step-state/step-state.projection';
import { evolveStepState } from '../src/step-state/step-state.projection';
import {
  compareTriage,
  countTriage,
  DEFAULT_TRIAGE_THRESHOLDS,
  triageItemOf,
  waitingItemOf,
} from '../src/step-state/triage';

const NOW = Date.parse('2026-12-03T10:00:00.000Z');
const minutesAgo = (minutes: number) => new Date(NOW - minutes * 60_000).toISOString();

function step(
  ref: string,
  status: StepStateDoc['status'],
  since: string,
  extra: Partial<StepStateDoc> = {},
): StepStateDoc {
  return {
    tenant: 'acme',
    operation_ref: ref,
    status,
    run_id: 'run_1',
    tool: 'create_invoice',
    side_effect: 'write',
    since,
    reason: 'R',
    attempts_used: 1,
    current_attempt: 1,
    attempts_remaining: 1,
    next_action: 'none',
    planned_at: since,
    updated_at: since,
    unknown_outcomes: 0,
    resolved_by_lookup: 0,
    duplicates_prevented: 0,
    identical_retries_blocked: 0,
    unverified_dispatches_refused: 0,
    revision: 3,
    position: 4,
    ...extra,
  };
}

describe('the triage queue, judged at an instant', () => {
  it('lists escalations and approvals at once, unknown outcomes and dispatches only past their thresholds', () => {
    const t = DEFAULT_TRIAGE_THRESHOLDS;
    expect(triageItemOf(step('a', 'escalated', minutesAgo(0)), NOW, t)?.kind).toBe('escalated');
    expect(triageItemOf(step('b', 'awaiting_approval', minutesAgo(0)), NOW, t)?.kind).toBe('awaiting_approval');
    const window = { consistency_window_ms: 15 * 60_000 };
    expect(triageItemOf(step('c', 'verifying', minutesAgo(14), window), NOW, t)).toBeUndefined();
    expect(triageItemOf(step('c', 'verifying', minutesAgo(15), window), NOW, t)).toMatchObject({
      kind: 'unknown_outcome',
      age_ms: 900_000,
      threshold_ms: 900_000,
    });
    expect(triageItemOf(step('d', 'dispatched', minutesAgo(4)), NOW, t)).toBeUndefined();
    expect(triageItemOf(step('d', 'dispatched', minutesAgo(5)), NOW, t)).toMatchObject({
      kind: 'dispatch_overdue',
      threshold_from: 'query',
    });
    for (const status of ['planned', 'retry_ready', 'succeeded', 'cancelled'] as const) {
      expect(triageItemOf(step('e', status, minutesAgo(600)), NOW, t)).toBeUndefined();
    }
  });

  it('lists a scheduled retry once it is a grace past its not_before, and an input awaited past its threshold', () => {
    const t = DEFAULT_TRIAGE_THRESHOLDS;
    const waiting = (notBeforeMinutesAgo: number) =>
      step('r', 'retry_scheduled', minutesAgo(10), { not_before: minutesAgo(notBeforeMinutesAgo) });
    expect(triageItemOf(waiting(-5), NOW, t)).toBeUndefined();
    expect(
      triageItemOf(
        step('r', 'retry_scheduled', minutesAgo(10), { not_before: new Date(NOW - 59_999).toISOString() }),
        NOW,
        t,
      ),
    ).toBeUndefined();
    expect(triageItemOf(waiting(1), NOW, t)).toMatchObject({
      kind: 'retry_overdue',
      threshold_ms: 60_000,
      status: 'retry_scheduled',
    });
    expect(triageItemOf(step('i', 'needs_input', minutesAgo(29)), NOW, t)).toBeUndefined();
    expect(triageItemOf(step('i', 'needs_input', minutesAgo(30)), NOW, t)).toMatchObject({
      kind: 'input_awaited',
      threshold_ms: 1_800_000,
    });
    expect(triageItemOf(step('i', 'needs_input', minutesAgo(1)), NOW, { ...t, input_after_ms: 0 })).toMatchObject({
      kind: 'input_awaited',
    });
  });

  it('an acknowledged escalation is its own kind, with who has it', () => {
    const acknowledged = { assignee: 'ana', by: 'key_1', at: minutesAgo(1) };
    expect(
      triageItemOf(step('a', 'escalated', minutesAgo(3), { acknowledged }), NOW, DEFAULT_TRIAGE_THRESHOLDS),
    ).toMatchObject({ kind: 'acknowledged', acknowledged });
  });

  it("uses a plan's own dispatch_timeout_ms, unless the query names one", () => {
    const own = step('d', 'dispatched', minutesAgo(2), { dispatch_timeout_ms: 60_000 });
    expect(triageItemOf(own, NOW, DEFAULT_TRIAGE_THRESHOLDS)).toMatchObject({
      kind: 'dispatch_overdue',
      threshold_ms: 60_000,
      threshold_from: 'policy',
    });
    const patient = step('d', 'dispatched', minutesAgo(10), { dispatch_timeout_ms: 3_600_000 });
    expect(triageItemOf(patient, NOW, DEFAULT_TRIAGE_THRESHOLDS)).toBeUndefined();
    const asked = { ...DEFAULT_TRIAGE_THRESHOLDS, dispatch_timeout_ms: 0, dispatch_timeout_asked: true };
    expect(triageItemOf(patient, NOW, asked)).toMatchObject({
      kind: 'dispatch_overdue',
      threshold_ms: 0,
      threshold_from: 'query',
    });
  });

  it("lists an unknown outcome once its plan's consistency window has passed, unless the query names a threshold; until then it is waiting, with when it comes due", () => {
    const t = DEFAULT_TRIAGE_THRESHOLDS;
    const slow = step('u', 'verifying', minutesAgo(9), { consistency_window_ms: 600_000, reason: 'OUTCOME_UNKNOWN' });
    expect(triageItemOf(slow, NOW, t)).toBeUndefined();
    expect(waitingItemOf(slow, NOW, t)).toEqual({
      operation_ref: 'u',
      run_id: 'run_1',
      tool: 'create_invoice',
      reason: 'OUTCOME_UNKNOWN',
      since: minutesAgo(9),
      due_at: minutesAgo(-1),
      threshold_ms: 600_000,
      threshold_from: 'policy',
      revision: 3,
    });
    const settled = step('u', 'verifying', minutesAgo(10), { consistency_window_ms: 600_000 });
    expect(triageItemOf(settled, NOW, t)).toMatchObject({
      kind: 'unknown_outcome',
      threshold_ms: 600_000,
      threshold_from: 'policy',
    });
    expect(waitingItemOf(settled, NOW, t)).toBeUndefined();
    // No window: a lookup can settle it at once, and a person is asked at once.
    const now = step('n', 'verifying', minutesAgo(0), { consistency_window_ms: 0 });
    expect(triageItemOf(now, NOW, t)).toMatchObject({ kind: 'unknown_outcome', threshold_from: 'policy' });
    // A document folded before the window was kept: the policy's default window.
    const old = step('o', 'verifying', new Date(NOW - DEFAULT_POLICY.consistency_window_ms).toISOString());
    expect(triageItemOf(old, NOW, t)).toMatchObject({ threshold_ms: DEFAULT_POLICY.consistency_window_ms });
    const asked = { ...t, unknown_after_ms: 15 * 60_000, unknown_after_asked: true };
    expect(triageItemOf(settled, NOW, asked)).toBeUndefined();
    expect(waitingItemOf(settled, NOW, asked)).toMatchObject({ due_at: minutesAgo(-5), threshold_from: 'query' });
    // Only a verifying step waits; one that may hold a duplicate write is in the queue already.
    expect(waitingItemOf(step('e', 'escalated', minutesAgo(0)), NOW, t)).toBeUndefined();
    expect(waitingItemOf({ ...slow, possible_duplicates: 1 }, NOW, t)).toBeUndefined();
  });

  it('orders newest first and counts per kind, tool and reason', () => {
    const items = [
      triageItemOf(step('old', 'escalated', minutesAgo(30), { tool: 'pay' }), NOW, DEFAULT_TRIAGE_THRESHOLDS),
      triageItemOf(
        step('new', 'awaiting_approval', minutesAgo(1), { reason: 'MISSING_APPROVAL' }),
        NOW,
        DEFAULT_TRIAGE_THRESHOLDS,
      ),
    ].filter((item) => item !== undefined);
    expect(items.sort(compareTriage).map((item) => item.operation_ref)).toEqual(['new', 'old']);
    expect(countTriage(items)).toEqual({
      total: 2,
      by_kind: {
        possible_duplicate: 0,
        escalated: 1,
        awaiting_approval: 1,
        unknown_outcome: 0,
        dispatch_overdue: 0,
        retry_overdue: 0,
        input_awaited: 0,
        acknowledged: 0,
      },
      by_tool: { pay: 1, create_invoice: 1 },
      by_reason: { R: 1, MISSING_APPROVAL: 1 },
    });
  });
});

describe("the plan's own dispatch timeout", () => {
  it("is read from the stored plan, and is the policy's default for a plan stored without it", () => {
    const plan = (policy: Record<string, unknown>) => ({
      stream: 'op-acme:r',
      revision: 0,
      position: 1,
      event_id: 'e1',
      type: 'StepPlanned',
      data: { run_id: 'run_1', tool: 't', side_effect: 'write', input_hash: 'h', policy },
      metadata: { recorded_at: '2026-12-03T10:00:00.000Z', actor: 'a', tenant: 'acme', operation_ref: 'r' },
    });
    expect(
      evolveStepState(undefined, plan({ max_attempts: 3, dispatch_timeout_ms: 120_000 })).dispatch_timeout_ms,
    ).toBe(120_000);
    expect(evolveStepState(undefined, plan({ max_attempts: 3 })).dispatch_timeout_ms).toBe(
      DEFAULT_POLICY.dispatch_timeout_ms,
    );
    expect(evolveStepState(undefined, plan({ dispatch_timeout_ms: 'soon' })).dispatch_timeout_ms).toBe(
      DEFAULT_POLICY.dispatch_timeout_ms,
    );
    // The consistency window the triage queue judges an unknown outcome by, kept the same way.
    expect(evolveStepState(undefined, plan({ consistency_window_ms: 5_000 })).consistency_window_ms).toBe(5_000);
    expect(evolveStepState(undefined, plan({})).consistency_window_ms).toBeUndefined();
  });
});
