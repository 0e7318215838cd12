import fc from 'fast-check';
import { QueueThrottlerStorage } from '../../../src/http/security/rate-limit.storage';

// Nest 12 ships ES modules only, which this CommonJS test run cannot load; the library's storage
// needs nothing of @nestjs/common but its @Injectable() decorator.
jest.mock('@nestjs/common', () => ({ Injectable: () => (target: unknown) => target }));
const { ThrottlerStorageService } =
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded after the mock above
  require('@nestjs/throttler/dist/throttler.service') as typeof import('@nestjs/throttler');

/**
 * QueueThrottlerStorage must answer exactly what @nestjs/throttler's own in-memory storage answers
 * (it only prunes more cheaply): both are driven by the same random calls on the same fake clock.
 */
describe('QueueThrottlerStorage', () => {
  let now = 0;
  beforeEach(() => {
    now = 1_700_000_000_000;
    jest.spyOn(Date, 'now').mockImplementation(() => now);
  });
  afterEach(() => jest.restoreAllMocks());

  const step = fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('hit' as const),
        key: fc.constantFrom('ip:a', 'key:b'),
        limit: fc.integer({ min: 1, max: 6 }),
        block: fc.boolean(),
      }),
    },
    // Mostly forward, sometimes past a whole window, now and then a step back (an NTP correction).
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant('tick' as const),
        ms: fc.oneof(
          fc.integer({ min: 0, max: 3_000 }),
          fc.integer({ min: 50_000, max: 70_000 }),
          fc.constantFrom(1_000, 10_000, 60_000),
          fc.integer({ min: -2_000, max: 0 }),
        ),
      }),
    },
  );

  it('answers what ThrottlerStorageService answers, call by call', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { maxLength: 120 }),
        fc.constantFrom(1_000, 10_000, 60_000),
        async (steps, ttl) => {
          const reference = new ThrottlerStorageService();
          const queue = new QueueThrottlerStorage();
          try {
            for (const s of steps) {
              if (s.kind === 'tick') {
                now += s.ms;
                continue;
              }
              const blockDuration = s.block ? ttl : 0;
              const expected = await reference.increment(s.key, ttl, s.limit, blockDuration, 'default');
              const actual = await queue.increment(s.key, ttl, s.limit, blockDuration, 'default');
              expect(actual).toEqual(expected);
            }
          } finally {
            reference.onApplicationShutdown();
            queue.onApplicationShutdown();
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('keeps the cost per request flat as the window fills', async () => {
    const queue = new QueueThrottlerStorage();
    for (let i = 0; i < 100_000; i++) {
      now += 1;
      await queue.increment('ip:a', 60_000, 10_000_000, 60_000, 'default');
    }
    // 100,000 hits over 100 s with a 60 s window: 60,000 live, the rest pruned from the front.
    const answer = await queue.increment('ip:a', 60_000, 10_000_000, 60_000, 'default');
    expect(answer.totalHits).toBe(60_001);
    queue.onApplicationShutdown();
  });
});
