import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Paces a long background pass (the whole-log audit, docs/reliability.md) to a share of one core:
 * after each slice of work it rests in proportion to the time the slice took, so over any stretch
 * it holds the thread at most `share` of the time, and every rest is a turn for the event loop
 * (reads, writes and readiness answer in between). A share of 1 only gives the loop its turn.
 */
export class CpuShare {
  private sliceStarted = performance.now();

  constructor(private readonly share: number) {
    if (!(share > 0 && share <= 1)) throw new RangeError(`a CPU share is in (0, 1], not ${share}`);
  }

  /** Ends a slice: rests for its proportion, then starts the next. */
  async pause(): Promise<void> {
    const worked = performance.now() - this.sliceStarted;
    const rest = (worked * (1 - this.share)) / this.share;
    if (rest >= 1) await sleep(rest);
    else await new Promise<void>((resolve) => setImmediate(resolve));
    this.sliceStarted = performance.now();
  }
}
