import type { OnApplicationShutdown } from '@nestjs/common';
import type { ThrottlerStorage } from '@nestjs/throttler';

/** What ThrottlerStorage.increment answers (@nestjs/throttler does not export the type by name). */
type ThrottlerStorageRecord = Awaited<ReturnType<ThrottlerStorage['increment']>>;

interface Hits {
  /** Expiry instants (ms), in the order the hits came; live ones from `head` on. */
  times: number[];
  head: number;
  /** A hit came with an earlier expiry than the one before it (the clock went back). */
  unordered: boolean;
}

interface KeyRecord {
  totalHits: Map<string, number>;
  expiresAt: number;
  blockExpiresAt: number;
  isBlocked: boolean;
  hits: Map<string, Hits>;
}

const SWEEP_INTERVAL_MS = 60_000;

/**
 * The in-memory storage of @nestjs/throttler 6 (ThrottlerStorageService), answering exactly what it
 * answers, with one difference in cost: it keeps each key's hit expiries as a queue and drops the
 * expired ones from its front, where the library filters the whole window into a new array on every
 * request. Hits are appended with now + ttl, so they expire in the order they came; a clock that
 * steps back breaks that order, and the queue then falls back to the library's full filter.
 *
 * Why: the library's cost per request grows with the hits in the window. Measured with
 * `npm run bench` (docs/performance.md): at a limit raised for load, 60,000 hits in a minute made
 * each request filter 60,000 numbers (several ms of CPU); at the default limit (6,000 a minute)
 * still a few hundred µs per request once the window is full.
 */
export class QueueThrottlerStorage implements ThrottlerStorage, OnApplicationShutdown {
  private readonly records = new Map<string, KeyRecord>();
  private sweep: ReturnType<typeof setInterval> | undefined;

  async increment(
    key: string,
    ttl: number,
    limit: number,
    blockDuration: number,
    throttlerName: string,
  ): Promise<ThrottlerStorageRecord> {
    this.ensureSweep();
    let record = this.records.get(key);
    if (!record) {
      record = {
        totalHits: new Map([[throttlerName, 0]]),
        expiresAt: Date.now() + ttl,
        blockExpiresAt: 0,
        isBlocked: false,
        hits: new Map(),
      };
      this.records.set(key, record);
    }
    const hits = this.hitsOf(record, throttlerName);
    this.prune(hits, Date.now());
    record.totalHits.set(throttlerName, hits.times.length - hits.head);
    let timeToExpire = Math.ceil((record.expiresAt - Date.now()) / 1000);
    if (timeToExpire <= 0) {
      record.expiresAt = Date.now() + ttl;
      timeToExpire = Math.ceil((record.expiresAt - Date.now()) / 1000);
    }
    if (blockDuration <= 0) {
      const isBlocked = (record.totalHits.get(throttlerName) ?? 0) >= limit;
      if (!isBlocked) this.fireHit(record, hits, throttlerName, ttl);
      const live = hits.times.length - hits.head;
      const timeToBlockExpire = live > 0 ? Math.ceil((this.earliest(hits) - Date.now()) / 1000) : timeToExpire;
      return {
        totalHits: (record.totalHits.get(throttlerName) ?? 0) + (isBlocked ? 1 : 0),
        timeToExpire,
        isBlocked,
        timeToBlockExpire: isBlocked ? timeToBlockExpire : 0,
      };
    }
    if (!record.isBlocked) this.fireHit(record, hits, throttlerName, ttl);
    if ((record.totalHits.get(throttlerName) ?? 0) > limit && !record.isBlocked) {
      record.isBlocked = true;
      record.blockExpiresAt = Date.now() + blockDuration;
    }
    const timeToBlockExpire = Math.ceil((record.blockExpiresAt - Date.now()) / 1000);
    if (timeToBlockExpire <= 0 && record.isBlocked) {
      record.isBlocked = false;
      record.totalHits.set(throttlerName, 0);
      record.hits.set(throttlerName, { times: [], head: 0, unordered: false });
      this.fireHit(record, this.hitsOf(record, throttlerName), throttlerName, ttl);
    }
    return {
      totalHits: record.totalHits.get(throttlerName) ?? 0,
      timeToExpire,
      isBlocked: record.isBlocked,
      timeToBlockExpire,
    };
  }

  onApplicationShutdown(): void {
    if (this.sweep) clearInterval(this.sweep);
    this.sweep = undefined;
    this.records.clear();
  }

  private hitsOf(record: KeyRecord, throttlerName: string): Hits {
    let hits = record.hits.get(throttlerName);
    if (!hits) {
      hits = { times: [], head: 0, unordered: false };
      record.hits.set(throttlerName, hits);
    }
    return hits;
  }

  private fireHit(record: KeyRecord, hits: Hits, throttlerName: string, ttl: number): void {
    record.totalHits.set(throttlerName, (record.totalHits.get(throttlerName) ?? 0) + 1);
    const expiresAt = Date.now() + ttl;
    if (hits.times.length > hits.head && expiresAt < hits.times[hits.times.length - 1]) hits.unordered = true;
    hits.times.push(expiresAt);
  }

  private prune(hits: Hits, now: number): void {
    if (hits.unordered) {
      hits.times = hits.times.slice(hits.head).filter((expiresAt) => expiresAt > now);
      hits.head = 0;
      hits.unordered = hits.times.some((expiresAt, index) => index > 0 && expiresAt < hits.times[index - 1]);
      return;
    }
    while (hits.head < hits.times.length && hits.times[hits.head] <= now) hits.head += 1;
    // Compact once the dead prefix is half the array: amortised O(1) per hit.
    if (hits.head > 1024 && hits.head * 2 > hits.times.length) {
      hits.times = hits.times.slice(hits.head);
      hits.head = 0;
    }
  }

  private earliest(hits: Hits): number {
    if (!hits.unordered) return hits.times[hits.head];
    let min = Infinity;
    for (let index = hits.head; index < hits.times.length; index++) min = Math.min(min, hits.times[index]);
    return min;
  }

  private ensureSweep(): void {
    if (this.sweep) return;
    // Forget keys with nothing live, as the library's sweep does, so idle callers do not pile up.
    this.sweep = setInterval(() => this.evictIdle(Date.now()), SWEEP_INTERVAL_MS);
    this.sweep.unref?.();
  }

  private evictIdle(now: number): void {
    for (const [key, record] of this.records) {
      if (record.isBlocked && record.blockExpiresAt > now) continue;
      if (record.expiresAt > now) continue;
      let live = false;
      for (const hits of record.hits.values()) {
        this.prune(hits, now);
        if (hits.times.length > hits.head) live = true;
      }
      if (!live) this.records.delete(key);
    }
  }
}
