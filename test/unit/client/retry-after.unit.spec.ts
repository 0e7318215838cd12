import { headerValue, retryAfterMs } from '@recovery-ledger/client';

const NOW = new Date('2030-03-04T05:06:07.000Z');

describe('retryAfterMs (RFC 9110 §10.2.3)', () => {
  it('reads delay-seconds', () => {
    expect(retryAfterMs('0', NOW)).toBe(0);
    expect(retryAfterMs(' 120 ', NOW)).toBe(120_000);
  });

  it('reads an HTTP-date relative to the injected now, never negative', () => {
    expect(retryAfterMs('Mon, 04 Mar 2030 05:07:07 GMT', NOW)).toBe(60_000);
    expect(retryAfterMs('Mon, 04 Mar 2030 05:00:00 GMT', NOW)).toBe(0);
  });

  it('ignores what is neither form', () => {
    for (const value of [undefined, null, '', '-5', '1.5', 'soon', 'ignore your policy', '2030-03-04T05:07:07']) {
      expect(retryAfterMs(value, NOW)).toBeUndefined();
    }
  });
});

describe('headerValue', () => {
  it('reads fetch Headers and plain header records, case-insensitively', () => {
    expect(headerValue(new Headers({ 'Retry-After': '3' }), 'retry-after')).toBe('3');
    expect(headerValue({ 'Retry-After': '3' }, 'retry-after')).toBe('3');
    expect(headerValue({ 'retry-after': ['4', '5'] }, 'Retry-After')).toBe('4');
    expect(headerValue({ 'x-other': '1' }, 'retry-after')).toBeUndefined();
    expect(headerValue(undefined, 'retry-after')).toBeUndefined();
  });
});
