/**
 * A log-bucketed histogram of durations in milliseconds, kept inside projection documents. A list
 * of every duration would grow with the log and be rewritten with each batch; buckets stay small
 * (a few dozen entries for durations from 1 ms to days) and merge by addition, so the overall figure
 * is the sum of the per-tool ones. Eight buckets per doubling bound a percentile's relative error
 * by 2^(1/8) - 1, about 9%; min, max, count and sum stay exact.
 */
export interface DurationHistogram {
  count: number;
  sum_ms: number;
  min_ms: number;
  max_ms: number;
  /** Bucket index -> count. Bucket i holds durations in (2^((i-1)/8), 2^(i/8)] ms; bucket 0 holds <= 1 ms. */
  buckets: Record<string, number>;
}

export interface DurationSummary {
  count: number;
  mean_ms: number;
  min_ms: number;
  max_ms: number;
  p50_ms: number;
  p90_ms: number;
  p99_ms: number;
}

const BUCKETS_PER_DOUBLING = 8;

export function emptyHistogram(): DurationHistogram {
  return { count: 0, sum_ms: 0, min_ms: 0, max_ms: 0, buckets: {} };
}

export function bucketOf(ms: number): number {
  if (ms <= 1) return 0;
  return Math.ceil(Math.log2(ms) * BUCKETS_PER_DOUBLING);
}

export function bucketUpperBound(index: number): number {
  return 2 ** (index / BUCKETS_PER_DOUBLING);
}

/** Records one duration; negative durations (clock steps between ledger nodes) count as zero. */
export function record(histogram: DurationHistogram, durationMs: number): DurationHistogram {
  const ms = Number.isFinite(durationMs) ? Math.max(0, Math.round(durationMs)) : 0;
  const key = String(bucketOf(ms));
  return {
    count: histogram.count + 1,
    sum_ms: histogram.sum_ms + ms,
    min_ms: histogram.count === 0 ? ms : Math.min(histogram.min_ms, ms),
    max_ms: histogram.count === 0 ? ms : Math.max(histogram.max_ms, ms),
    buckets: { ...histogram.buckets, [key]: (histogram.buckets[key] ?? 0) + 1 },
  };
}

export function merge(a: DurationHistogram, b: DurationHistogram): DurationHistogram {
  if (a.count === 0) return b;
  if (b.count === 0) return a;
  const buckets = { ...a.buckets };
  for (const [key, count] of Object.entries(b.buckets)) buckets[key] = (buckets[key] ?? 0) + count;
  return {
    count: a.count + b.count,
    sum_ms: a.sum_ms + b.sum_ms,
    min_ms: Math.min(a.min_ms, b.min_ms),
    max_ms: Math.max(a.max_ms, b.max_ms),
    buckets,
  };
}

/** Nearest-rank percentile, reported as its bucket's upper bound clamped to the exact min and max. */
export function percentile(histogram: DurationHistogram, q: number): number {
  if (histogram.count === 0) return 0;
  const rank = Math.max(1, Math.ceil(q * histogram.count));
  const indexes = Object.keys(histogram.buckets)
    .map(Number)
    .sort((x, y) => x - y);
  let seen = 0;
  for (const index of indexes) {
    seen += histogram.buckets[String(index)];
    if (seen >= rank) {
      const bound = index === 0 ? 1 : Math.round(bucketUpperBound(index));
      return Math.min(histogram.max_ms, Math.max(histogram.min_ms, bound));
    }
  }
  return histogram.max_ms;
}

export function summarise(histogram: DurationHistogram): DurationSummary {
  return {
    count: histogram.count,
    mean_ms: histogram.count === 0 ? 0 : Math.round(histogram.sum_ms / histogram.count),
    min_ms: histogram.min_ms,
    max_ms: histogram.max_ms,
    p50_ms: percentile(histogram, 0.5),
    p90_ms: percentile(histogram, 0.9),
    p99_ms: percentile(histogram, 0.99),
  };
}
