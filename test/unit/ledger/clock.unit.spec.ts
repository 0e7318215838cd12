/**
 * The ledger clock judges windows on elapsed (monotonic) time: a step of the wall clock is seen and
 * counted, and moves nothing (docs/reliability.md, "A stepped clock").
 */
import { decisionTime, MonotonicClock, type ClockStep } from '../../../src/shared/clock';

const HOUR = 3_600_000;

function steppable(startWall = Date.parse('2026-05-01T10:00:00.000Z')) {
  let wall = startWall;
  let monotonic = 1_000;
  const steps: ClockStep[] = [];
  const clock = new MonotonicClock({
    wallNow: () => wall,
    monotonicNow: () => monotonic,
    onStep: (step) => steps.push(step),
  });
  return {
    clock,
    steps,
    elapse(ms: number) {
      wall += ms;
      monotonic += ms;
    },
    stepWall(ms: number) {
      wall += ms;
    },
  };
}

describe('MonotonicClock', () => {
  it('follows elapsed time, not a wall clock stepped forward or back', () => {
    const t = steppable();
    const start = t.clock.now().getTime();
    t.elapse(1_000);
    t.stepWall(HOUR);
    expect(t.clock.now().getTime() - start).toBe(1_000);
    t.elapse(500);
    t.stepWall(-2 * HOUR);
    expect(t.clock.now().getTime() - start).toBe(1_500);
  });

  it('counts each step once, with its offset, and tells who listens', () => {
    const t = steppable();
    t.clock.now();
    t.stepWall(HOUR);
    t.clock.now();
    t.clock.now();
    expect(t.steps).toHaveLength(1);
    expect(t.steps[0].offset_ms).toBe(HOUR);
    t.stepWall(-HOUR);
    expect(t.clock.status()).toMatchObject({ steps_detected: 2, offset_ms: 0 });
  });

  it('does not count drift within the tolerance as a step', () => {
    const t = steppable();
    t.clock.now();
    t.stepWall(400);
    t.clock.now();
    t.stepWall(400);
    t.clock.now();
    expect(t.steps).toHaveLength(0);
    expect(t.clock.status().offset_ms).toBe(800);
  });

  it('never goes backwards', () => {
    const t = steppable();
    let previous = t.clock.now().getTime();
    for (let i = 0; i < 100; i++) {
      t.elapse(i % 7);
      t.stepWall(i % 2 === 0 ? -HOUR : HOUR);
      const now = t.clock.now().getTime();
      expect(now).toBeGreaterThanOrEqual(previous);
      previous = now;
    }
  });
});

describe('decisionTime', () => {
  const fixed = { now: () => new Date('2026-05-01T10:00:00.000Z') };

  it('is the clock when the stream is behind it', () => {
    expect(decisionTime(fixed, '2026-05-01T09:59:00.000Z')).toBe('2026-05-01T10:00:00.000Z');
    expect(decisionTime(fixed, undefined)).toBe('2026-05-01T10:00:00.000Z');
  });

  it("is never before the stream's last recorded_at", () => {
    expect(decisionTime(fixed, '2026-05-01T11:00:00.000Z')).toBe('2026-05-01T11:00:00.000Z');
  });
});

describe('MonotonicClock on a shared base', () => {
  it('reads the base plus monotonic time since it, and counts a wall clock off the base as a step at once', () => {
    const steps: ClockStep[] = [];
    const base = { wallMs: Date.parse('2026-05-01T10:00:00.000Z'), monotonicMs: 1_000 };
    // This process started 10 s after the base was written, its wall clock an hour ahead.
    let monotonic = 11_000;
    const clock = new MonotonicClock({
      base,
      monotonicNow: () => monotonic,
      wallNow: () => base.wallMs + 10_000 + HOUR + (monotonic - 11_000),
      onStep: (step) => steps.push(step),
    });
    expect(clock.now().toISOString()).toBe('2026-05-01T10:00:10.000Z');
    monotonic += 500;
    expect(clock.now().toISOString()).toBe('2026-05-01T10:00:10.500Z');
    expect(steps).toEqual([{ detected_at: '2026-05-01T10:00:10.000Z', offset_ms: HOUR }]);
  });
});
