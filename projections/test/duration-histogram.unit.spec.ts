import fc from 'fast-check';
import { emptyHistogram, merge, percentile, record, summarise } from '../src/trust-metrics/duration-histogram';

const durations = fc.array(fc.integer({ min: 0, max: 7 * 86_400_000 }), { minLength: 1, maxLength: 300 });

function exactNearestRank(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(1, Math.ceil(q * sorted.length)) - 1];
}

describe('duration histogram', () => {
  it('reports each percentile at or above the exact one, within one bucket (2^(1/8), about 9%)', () => {
    fc.assert(
      fc.property(durations, fc.constantFrom(0.5, 0.9, 0.99), (values, q) => {
        const histogram = values.reduce(record, emptyHistogram());
        const exact = exactNearestRank(values, q);
        const reported = percentile(histogram, q);
        expect(reported).toBeGreaterThanOrEqual(exact);
        expect(reported).toBeLessThanOrEqual(Math.max(1, exact * 2 ** (1 / 8) + 1));
      }),
    );
  });

  it('keeps count, sum, min and max exact', () => {
    const histogram = [1_200, 40_000, 90_000, 0].reduce(record, emptyHistogram());
    expect(summarise(histogram)).toMatchObject({ count: 4, min_ms: 0, max_ms: 90_000, mean_ms: 32_800 });
  });

  it('merges two histograms into the histogram of both samples', () => {
    fc.assert(
      fc.property(durations, durations, (a, b) => {
        const merged = merge(a.reduce(record, emptyHistogram()), b.reduce(record, emptyHistogram()));
        expect(merged).toEqual([...a, ...b].reduce(record, emptyHistogram()));
      }),
    );
  });

  it('answers zero for an empty histogram', () => {
    expect(summarise(emptyHistogram())).toEqual({
      count: 0,
      mean_ms: 0,
      min_ms: 0,
      max_ms: 0,
      p50_ms: 0,
      p90_ms: 0,
      p99_ms: 0,
    });
  });
});
