/**
 * One Prometheus histogram of the service, read twice from `GET /metrics`: what it counted between
 * the two reads, and the bucket bound each quantile falls under (a histogram keeps no more than
 * that: a p99 of "≤ 15 ms" says 99 % of the observations were at most 15 ms).
 */
export type Buckets = Map<number, number>;

/** The cumulative bucket counts of `name` (no labels) in one exposition, by upper bound. */
export function histogramBuckets(exposition: string, name: string): Buckets {
  const buckets: Buckets = new Map();
  const line = new RegExp(`^${name}_bucket\\{le="([^"]+)"\\} (\\S+)$`, 'gm');
  for (const match of exposition.matchAll(line))
    buckets.set(match[1] === '+Inf' ? Infinity : Number(match[1]), Number(match[2]));
  return buckets;
}

export async function scrapeHistogram(baseUrl: string, name: string): Promise<Buckets> {
  const answer = await fetch(`${baseUrl}/metrics`);
  if (!answer.ok) throw new Error(`GET /metrics answered ${answer.status}`);
  return histogramBuckets(await answer.text(), name);
}

/** Observations between two reads, and the bucket bound (in the histogram's unit) of each quantile asked. */
export function quantilesBetween(
  before: Buckets,
  after: Buckets,
  quantiles: readonly number[],
): { count: number; bounds: number[] } {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const cumulative = bounds.map((bound) => (after.get(bound) ?? 0) - (before.get(bound) ?? 0));
  const count = cumulative.at(-1) ?? 0;
  return {
    count,
    bounds: quantiles.map((q) => bounds[cumulative.findIndex((seen) => count > 0 && seen >= q * count)] ?? NaN),
  };
}
