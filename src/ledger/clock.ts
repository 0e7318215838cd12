/**
 * The ledger's clock. Decisions get `now` from here, never from the client (docs/contract.md §4).
 *
 * Windows (a consistency window, a `not_before`) are judged on time that actually elapsed, so the
 * production clock is not the wall clock: it reads the wall clock once, at start, and from then on
 * advances by the kernel's monotonic clock, which a step of the wall clock (an operator's `date -s`,
 * an NTP step, a VM resumed from a snapshot) does not move. A step is only observed: logged, counted
 * in /metrics and shown by /health/ready (docs/reliability.md, "A stepped clock").
 */
export interface Clock {
  now(): Date;
}

export const CLOCK = Symbol('CLOCK');

/** The wall clock as it is: for tests that set the time, and for tools that only print it. */
export const systemClock: Clock = { now: () => new Date() };

export interface ClockStep {
  /** When the step was seen, in ledger time. */
  detected_at: string;
  /** Wall clock minus ledger time when it was seen (positive: the wall clock jumped ahead). */
  offset_ms: number;
}

export interface ClockStatus {
  /** Wall clock minus ledger time now. */
  offset_ms: number;
  steps_detected: number;
  last_step?: ClockStep;
  tolerance_ms: number;
}

export interface MonotonicClockOptions {
  /** A wall clock offset beyond this (from the last one observed) counts as a step. */
  stepToleranceMs?: number;
  wallNow?: () => number;
  /** Milliseconds from an arbitrary origin that only moves forward (process.hrtime). */
  monotonicNow?: () => number;
  onStep?: (step: ClockStep) => void;
}

const monotonicMs = () => Number(process.hrtime.bigint()) / 1e6;

/**
 * Ledger time = the wall clock read at start + monotonic time elapsed since. It never goes back
 * and a wall clock step neither shortens nor stretches a window; NTP's gradual slewing (at most
 * 500 ppm) moves the monotonic clock too, so that is the tolerance: 15 ms over a 30 s window.
 */
export class MonotonicClock implements Clock {
  private readonly wallNow: () => number;
  private readonly monotonicNow: () => number;
  private readonly startWall: number;
  private readonly startMonotonic: number;
  private readonly toleranceMs: number;
  private lastOffset = 0;
  private steps = 0;
  private lastStep: ClockStep | undefined;

  constructor(private readonly options: MonotonicClockOptions = {}) {
    this.wallNow = options.wallNow ?? Date.now;
    this.monotonicNow = options.monotonicNow ?? monotonicMs;
    this.startWall = this.wallNow();
    this.startMonotonic = this.monotonicNow();
    this.toleranceMs = options.stepToleranceMs ?? 1000;
  }

  now(): Date {
    const ledgerMs = this.startWall + (this.monotonicNow() - this.startMonotonic);
    this.observe(ledgerMs);
    return new Date(Math.floor(ledgerMs));
  }

  status(): ClockStatus {
    this.now();
    return {
      offset_ms: Math.round(this.lastOffset),
      steps_detected: this.steps,
      ...(this.lastStep ? { last_step: this.lastStep } : {}),
      tolerance_ms: this.toleranceMs,
    };
  }

  private observe(ledgerMs: number): void {
    const offset = this.wallNow() - ledgerMs;
    if (Math.abs(offset - this.lastOffset) > this.toleranceMs) {
      this.steps += 1;
      this.lastStep = { detected_at: new Date(Math.floor(ledgerMs)).toISOString(), offset_ms: Math.round(offset) };
      this.options.onStep?.(this.lastStep);
    }
    this.lastOffset = offset;
  }
}

/**
 * The time a decision on a stream is taken at: the ledger clock, but never before the stream's last
 * `recorded_at`, so time inside one stream never runs backwards (a restart on a wall clock set
 * behind what an earlier process recorded only waits; it never reopens a window early).
 */
export function decisionTime(clock: Clock, lastRecordedAt: string | undefined): string {
  const now = clock.now().getTime();
  const floor = lastRecordedAt === undefined ? Number.NEGATIVE_INFINITY : Date.parse(lastRecordedAt);
  return new Date(Number.isFinite(floor) && floor > now ? floor : now).toISOString();
}
