import { findUnsafeNumber } from '../../../src/http/security/body-inspection';
import { checkOperationRef } from '../../../src/http/operation-ref';
import { MAX_RETRY_AFTER_SECONDS, problemBody, safeFieldPath } from '../../../src/http/problem-body';
import { isRfc3339Instant, LedgerProblem } from '@recovery-ledger/core';
import { onlyTenant } from '../../../src/observability/metrics';
import { loggedPath } from '../../../src/logging/logged-path';
import { requestIdOf } from '../../../src/logging/request-context';

describe('RFC 3339 instants', () => {
  it.each([
    '2026-02-28T10:00:00Z',
    '2028-02-29T23:59:59.123456789+14:00',
    '2026-12-03T06:00:00-05:30',
    '9999-12-31T23:59:59Z',
    '2026-01-01t00:00:00z',
  ])('accepts %s', (value) => {
    expect(isRfc3339Instant(value)).toBe(true);
  });
  it.each([
    '2026-02-30T10:00:00Z',
    '2027-02-29T10:00:00Z',
    '2026-04-31T00:00:00Z',
    '2026-13-01T00:00:00Z',
    '2026-00-10T00:00:00Z',
    '2026-02-28T10:00:00',
    '2026-02-28',
    '2026-02-28 10:00:00Z',
    '2026-02-28T24:00:00Z',
    '2026-02-28T10:60:00Z',
    '2026-06-30T23:59:60Z',
    '2026-02-28T10:00:00+24:00',
    '2026-02-28T10:00:00+0100',
    '+002026-02-28T10:00:00Z',
    'yesterday',
    '',
  ])('refuses %s', (value) => {
    expect(isRfc3339Instant(value)).toBe(false);
  });
});

describe('numbers JSON.parse cannot keep', () => {
  it.each([
    ['{"a":1e400}', 'a'],
    ['{"a":-1e400}', 'a'],
    ['{"events":[{"data":{"attempt":12345678901234567890}}]}', 'events[0].data.attempt'],
    ['{"x":"1e400 in a string","y":[1,2,[3,9007199254740993]]}', 'y[2][1]'],
    ['{"k\\"ey":{"deep":1e-400}}', 'k"ey.deep'],
    ['[1.5e300]', '[0]'],
  ])('%s names %s', (text, field) => {
    expect(findUnsafeNumber(text)?.field).toBe(field);
  });
  it.each([
    '{"a":9007199254740991,"b":-9007199254740991}',
    '{"a":1.5,"b":1e3,"c":0.000001,"d":0e10}',
    '{"s":"12345678901234567890 and 1e400"}',
    '{"a":0.0}',
  ])('keeps %s', (text) => {
    expect(findUnsafeNumber(text)).toBeUndefined();
  });
});

describe('operation refs', () => {
  it('are brought to NFC, so a decomposed é names the same operation', () => {
    expect(checkOperationRef('caf\u0065\u0301/step_1')).toBe('caf\u00e9/step_1');
  });
  it.each([
    ['a right-to-left override', 'run_1/\u202Estep'],
    ['a zero-width space', 'run_1/\u200Bstep'],
    ['a byte order mark', '\uFEFFrun_1'],
    ['a division slash for /', 'run_1\u2215step_1'],
    ['a no-break space', 'run\u00A01'],
    ['a leading space', ' run_1'],
    ['a control character', 'run\u00071'],
    ['nothing', ''],
  ])('refuse %s', (_what, ref) => {
    expect(() => checkOperationRef(ref)).toThrow(LedgerProblem);
  });
  it('accept letters of any script', () => {
    expect(checkOperationRef('заказ-42/шаг_1')).toBe('заказ-42/шаг_1');
  });
});

describe('what answers and logs echo', () => {
  it('a field path names unknown keys that could be secrets as <key>', () => {
    expect(safeFieldPath('events[0].data.tool')).toBe('events[0].data.tool');
    expect(safeFieldPath('events[0].data.ghp_16C7e42F292c6912E7710c838347Ae178B4a')).toBe('events[0].data.<key>');
    expect(safeFieldPath('events[0].data.sk_live_abcdefghijklmnop')).toBe('events[0].data.<key>');
    expect(safeFieldPath('events[0].data.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')).toBe('events[0].data.<key>');
    expect(safeFieldPath('events[0].data.policy.max_consecutive_dependency_failures')).toBe(
      'events[0].data.policy.max_consecutive_dependency_failures',
    );
    expect(safeFieldPath('events[0].hasOwnProperty')).toBe('events[0].hasOwnProperty');
    const body = problemBody(
      new LedgerProblem('BAD_REQUEST', 'events[0].data.Bearer_XYZ property Bearer_XYZ should not exist', {
        field: 'events[0].data.Bearer_XYZ',
      }),
    );
    expect(JSON.stringify(body)).not.toContain('Bearer_XYZ');
  });
  it('Retry-After is capped', () => {
    expect(
      problemBody(new LedgerProblem('RETRY_NOT_BEFORE', 'later', { retryAfterSeconds: 251606029211 }))
        .retry_after_seconds,
    ).toBe(MAX_RETRY_AFTER_SECONDS);
  });
  it('the log writes route patterns, never the path or the query', () => {
    expect(loggedPath('/v1/operations/ghp_x%2Fy/events?api_key=zzz')).toBe('/v1/operations/:ref/events');
    expect(loggedPath('/v1/runs/run_1')).toBe('/v1/runs/:run_id');
    expect(loggedPath('/v1/recovery?tool=x')).toBe('/v1/recovery');
    expect(loggedPath('/nope/sk_live_abcdefghijklmnop')).toBe('<unmatched>');
  });
  it('a request id that looks like a credential is replaced', () => {
    expect(requestIdOf('req-123')).toBe('req-123');
    expect(requestIdOf('ghp_16C7e42F292c6912E7710c838347Ae178B4a')).not.toContain('ghp_');
  });
});

describe("a tenant's admin scrape", () => {
  it("keeps only that tenant's samples and their families' headers", () => {
    const text = [
      '# HELP a_total A',
      '# TYPE a_total counter',
      'a_total{tenant="acme"} 1',
      'a_total{tenant="globex"} 2',
      '# HELP process_cpu CPU',
      '# TYPE process_cpu gauge',
      'process_cpu 3',
      '# HELP b B',
      '# TYPE b counter',
      'b{code="X",tenant="acme"} 4',
      'b{code="tenant=\\"acme\\"",tenant="globex"} 5',
      '',
    ].join('\n');
    expect(onlyTenant(text, 'acme')).toBe(
      [
        '# HELP a_total A',
        '# TYPE a_total counter',
        'a_total{tenant="acme"} 1',
        '# HELP b B',
        '# TYPE b counter',
        'b{code="X",tenant="acme"} 4',
        '',
      ].join('\n'),
    );
  });
});
