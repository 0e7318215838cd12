/**
 * The ledger's clock. Decisions get `now` from here, never from the client (docs/contract.md §4).
 *
 * Windows (a consistency window, a `not_before`) are judged on time that actually elapsed, so the
 * production clock is not the wall clock: it starts from a base (the wall clock read once, with the
 * monotonic clock at that moment) and advances by the kernel's monotonic clock, which a step of the
 * wall clock (an operator's `date -s`, an NTP step, a VM resumed from a snapshot) does not move. A
 * step is only observed: logged, counted in /metrics and shown by /health/ready (docs/reliability.md,
 * "A stepped clock"). The base is the one the instances of this boot share in the store, so every
 * instance judges a lease on the same time (src/ledger/instance-clocks.ts).
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
  /**
   * Where ledger time starts: a wall clock reading and the monotonic clock at that moment. Without
   * one, this process's own start. Instances of one boot share one from the store, so their ledger
   * clocks agree (docs/reliability.md, "Instances agree on time").
   */
  base?: { wallMs: number; monotonicMs: number };
  wallNow?: () => number;
  /** Milliseconds from an arbitrary origin that only moves forward (process.hrtime). */
  monotonicNow?: () => number;
  onStep?: (step: ClockStep) => void;
}

/** CLOCK_MONOTONIC on Linux (libuv's uv_hrtime): one clock for every process of one boot. */
export const monotonicMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/**
 * Ledger time = the wall clock read at start (the base) + monotonic time elapsed since. A base
 * adopted from the store makes a wall clock that differs from it count as a step at the first
 * reading: this process's wall clock disagrees with the time its instances share. It never goes back
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
    this.startWall = options.base?.wallMs ?? this.wallNow();
    this.startMonotonic = options.base?.monotonicMs ?? this.monotonicNow();
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
