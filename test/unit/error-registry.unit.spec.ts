import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { ERROR_REGISTRY, type ErrorCode, errorDefinition, LedgerProblem } from '@recovery-ledger/core';
import { DEFAULT_RETRY_AFTER_SECONDS, problemBody } from '../../src/http/problem-body';

/** The README's error table and the registry say the same, both ways (one registry of codes). */
function readmeCodes(): Map<string, number> {
  const readme = readFileSync(resolve(__dirname, '../../README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Error codes'));
  const rows = new Map<string, number>();
  for (const match of section.matchAll(/^\|\s*(\d{3})\s*\|\s*`([A-Z_]+)`\s*\|/gm)) rows.set(match[2], Number(match[1]));
  return rows;
}

describe('error registry', () => {
  const documented = readmeCodes();

  it('documents every registered code with its status', () => {
    for (const [code, definition] of Object.entries(ERROR_REGISTRY)) {
      expect({ code, status: documented.get(code) }).toEqual({ code, status: definition.status });
    }
  });

  it('registers every documented code', () => {
    for (const code of documented.keys()) expect(Object.keys(ERROR_REGISTRY)).toContain(code);
  });

  it('marks retryAfter exactly the codes the README answers "with `Retry-After`"', () => {
    const readme = readFileSync(resolve(__dirname, '../../README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Error codes'));
    const documented = [...section.matchAll(/^\|\s*\d{3}\s*\|\s*`([A-Z_]+)`\s*\|.*with `Retry-After`/gm)]
      .map((match) => match[1])
      .sort();
    const marked = Object.keys(ERROR_REGISTRY)
      .filter((code) => errorDefinition(code as ErrorCode).retryAfter)
      .sort();
    expect(marked).toEqual(documented);
  });

  it('answers a marked code with Retry-After even when its cause named no delay, and no other code without one', () => {
    for (const code of Object.keys(ERROR_REGISTRY) as ErrorCode[]) {
      const body = problemBody(new LedgerProblem(code, 'no delay named'));
      expect({ code, retry_after_seconds: body.retry_after_seconds }).toEqual({
        code,
        retry_after_seconds: errorDefinition(code).retryAfter ? DEFAULT_RETRY_AFTER_SECONDS : undefined,
      });
    }
  });

  it('never answers a refusal with a 5xx', () => {
    const fiveHundreds = Object.entries(ERROR_REGISTRY)
      .filter(([, d]) => d.status >= 500)
      .map(([code]) => code);
    expect(fiveHundreds.sort()).toEqual([
      'CLOCK_SKEW_UNBOUNDED',
      'HISTORY_INTEGRITY_FAILED',
      'HISTORY_ROLLED_BACK',
      'INTERNAL_ERROR',
      'PROJECTION_LAGGING',
      'STORE_UNAVAILABLE',
    ]);
  });
});
