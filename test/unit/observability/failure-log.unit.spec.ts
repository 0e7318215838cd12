/**
 * A store that is down makes the projection engine fail every second and the rollback check every
 * two: the log gets one line per failure kind, then lines at a doubling interval with the count,
 * and a store that cannot be reached never writes a stack.
 */
import { FailureLog } from '../../../src/logging/failure-log';
import { StoreUnavailableError } from '../../../src/store/event-store.port';

function logged() {
  const lines: Array<{ fields: Record<string, unknown>; message: string }> = [];
  let now = Date.parse('2026-12-07T00:00:00.000Z');
  const log = new FailureLog({ error: (fields, message) => lines.push({ fields, message }) }, () => now);
  return { lines, log, advance: (ms: number) => (now += ms) };
}

describe('FailureLog', () => {
  it('an hour of an unreachable store, failing every second, writes a few lines and no stack', () => {
    const { lines, log, advance } = logged();
    for (let second = 0; second < 3600; second++) {
      log.failed(new StoreUnavailableError('14 UNAVAILABLE: connect ECONNREFUSED 127.0.0.1:2113'), 'engine failed');
      advance(1000);
    }
    // 1 + one per doubling gap (2, 4, ... 256 s) + one per 5 minutes after that.
    expect(lines.length).toBeLessThanOrEqual(20);
    expect(lines[0]).toEqual({
      fields: { store_unavailable: '14 UNAVAILABLE: connect ECONNREFUSED 127.0.0.1:2113' },
      message: 'engine failed',
    });
    expect(lines.every(({ fields }) => !('err' in fields))).toBe(true);
    expect(lines.at(-1)?.message).toMatch(
      /^engine failed \(still failing: \d{4} times since 2026-12-07T00:00:00\.000Z\)$/,
    );
  });

  it('each failure kind gets its own first line; an unexpected error keeps its stack the first time', () => {
    const { lines, log, advance } = logged();
    const bug = new TypeError('x is undefined');
    log.failed(new StoreUnavailableError('down'), 'failed');
    log.failed(bug, 'failed');
    advance(500);
    log.failed(new StoreUnavailableError('down'), 'failed');
    log.failed(bug, 'failed');
    expect(lines.map(({ fields }) => Object.keys(fields))).toEqual([['store_unavailable'], ['err']]);
    expect(lines[1].fields.err).toBe(bug);
  });

  it('a kind quiet for a minute starts afresh: the next outage gets its first line at once', () => {
    const { lines, log, advance } = logged();
    for (let i = 0; i < 10; i++) {
      log.failed(new StoreUnavailableError('down'), 'failed');
      advance(1000);
    }
    const before = lines.length;
    advance(120_000);
    log.failed(new StoreUnavailableError('down again'), 'failed');
    expect(lines.length).toBe(before + 1);
    expect(lines.at(-1)).toEqual({ fields: { store_unavailable: 'down again' }, message: 'failed' });
  });
});
