/**
 * When the work feed hands a step out, and the jitter it adds to a scheduled retry: pure,
 * deterministic per operation_ref and attempt, bounded, and spread across a burst.
 */
import fc from 'fast-check';
import { dueWork, RETRY_JITTER_MAX_MS, RETRY_JITTER_MIN_MS, retryJitterMs, STEP_STATUSES } from '@recovery-ledger/core';

const T = Date.parse('2026-12-03T10:00:00.000Z');
const base = { operation_ref: 'run_81/step_4', attempts_used: 1, since_ms: T, dispatch_timeout_ms: 60_000 };

describe('dueWork', () => {
  it('hands out planned and retry_ready steps at once to dispatch, verifying steps at once to verify', () => {
    expect(dueWork({ ...base, status: 'planned' })).toEqual({ kind: 'dispatch', due_ms: T });
    expect(dueWork({ ...base, status: 'retry_ready' })).toEqual({ kind: 'dispatch', due_ms: T });
    expect(dueWork({ ...base, status: 'verifying' })).toEqual({ kind: 'verify', due_ms: T });
  });

  it('hands out a dispatched step for verification only after its dispatch timeout', () => {
    expect(dueWork({ ...base, status: 'dispatched' })).toEqual({ kind: 'verify', due_ms: T + 60_000 });
    expect(dueWork({ ...base, status: 'dispatched', dispatch_timeout_ms: 1000 })).toEqual({
      kind: 'verify',
      due_ms: T + 1000,
    });
  });

  it('never hands out steps that wait for a person or are over', () => {
    for (const status of ['needs_input', 'awaiting_approval', 'succeeded', 'escalated', 'unplanned'] as const) {
      expect(dueWork({ ...base, status })).toBeUndefined();
    }
  });

  it('hands out a scheduled retry never before not_before, and within the jitter bound after it', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 40 }),
        fc.integer({ min: 0, max: 20 }),
        fc.integer({ min: 0, max: 3_600_000 }),
        (ref, attempts, waitMs) => {
          const due = dueWork({
            ...base,
            operation_ref: ref,
            attempts_used: attempts,
            status: 'retry_scheduled',
            not_before_ms: T + waitMs,
          });
          expect(due?.kind).toBe('dispatch');
          expect(due!.due_ms).toBeGreaterThanOrEqual(T + waitMs);
          expect(due!.due_ms - (T + waitMs)).toBeLessThan(
            Math.max(RETRY_JITTER_MIN_MS, Math.min(RETRY_JITTER_MAX_MS, waitMs / 10)) + 1,
          );
        },
      ),
    );
  });

  it('covers every status (a new one must say whether it is due)', () => {
    for (const status of STEP_STATUSES) expect(() => dueWork({ ...base, status })).not.toThrow();
  });
});

describe('retryJitterMs', () => {
  it('is the same for the same ref and attempt, in any process', () => {
    expect(retryJitterMs('run_81/step_4', 2, 60_000)).toBe(retryJitterMs('run_81/step_4', 2, 60_000));
    expect(retryJitterMs('run_81/step_4', 2, 60_000)).not.toBe(retryJitterMs('run_81/step_4', 3, 60_000));
  });

  it('spreads a burst rate-limited at one instant over the window', () => {
    const jitters = Array.from({ length: 1000 }, (_, index) => retryJitterMs(`run_burst/step_${index}`, 1, 10_000));
    const window = 1000;
    expect(Math.min(...jitters)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...jitters)).toBeLessThan(window);
    // Ten buckets of the window: none empty, none holding more than a fifth of the burst.
    const buckets = Array.from({ length: 10 }, () => 0);
    for (const jitter of jitters) buckets[Math.floor(jitter / (window / 10))] += 1;
    expect(Math.min(...buckets)).toBeGreaterThan(50);
    expect(Math.max(...buckets)).toBeLessThan(200);
  });
});
