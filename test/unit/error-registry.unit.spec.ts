import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { ERROR_REGISTRY } from '../../src/errors/error-registry';

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

  it('never answers a refusal with a 5xx', () => {
    const fiveHundreds = Object.entries(ERROR_REGISTRY).filter(([, d]) => d.status >= 500).map(([code]) => code);
    expect(fiveHundreds.sort()).toEqual(['HISTORY_INTEGRITY_FAILED', 'INTERNAL_ERROR', 'PROJECTION_LAGGING', 'STORE_UNAVAILABLE']);
  });
});
