/**
 * The console is plain JavaScript the browser loads as it is (src/ui/assets), so the type checker
 * never reads the fact types it names. Each one must be a fact or event the ledger records
 * (packages/core/src/domain/events.ts), and every fact it submits one an operator key may record
 * (the facts' one definition, packages/core/src/facts/submitted-facts.ts): a renamed or removed fact
 * fails here instead of in an operator's browser.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isSubmittedFactType, LEDGER_EVENT_TYPES, SUBMITTED_FACTS } from '@recovery-ledger/core';

const ASSETS = join(__dirname, '../../../src/ui/assets');
const sources = readdirSync(ASSETS)
  .filter((name) => name.endsWith('.js'))
  .map((name) => ({ name, text: readFileSync(join(ASSETS, name), 'utf8') }));

function named(pattern: RegExp): Array<{ file: string; type: string }> {
  return sources.flatMap(({ name, text }) =>
    [...text.matchAll(pattern)].map((match) => ({ file: name, type: match[1] })),
  );
}

describe('the fact types the console names', () => {
  const submitted = named(/(?:type|fact): '([A-Z][A-Za-z]+)'/g);
  const shown = named(/case '([A-Z][A-Za-z]+)'/g);

  it('finds the names it checks', () => {
    expect(submitted.length).toBeGreaterThan(0);
    expect(shown.length).toBeGreaterThan(0);
  });

  it('are all facts or events the ledger records', () => {
    const known = new Set<string>(LEDGER_EVENT_TYPES);
    expect([...submitted, ...shown].filter(({ type }) => !known.has(type))).toEqual([]);
  });

  it('submits only facts an operator or an approver records', () => {
    const refused = submitted.filter(
      ({ type }) => !isSubmittedFactType(type) || SUBMITTED_FACTS[type].recordedBy === 'runtime',
    );
    expect(refused).toEqual([]);
  });
});
