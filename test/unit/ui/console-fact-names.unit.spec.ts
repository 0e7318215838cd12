/**
 * The console is plain JavaScript the browser loads as it is (src/ui/assets), so the type checker
 * never reads the fact types it names. It reads the operator facts from the OpenAPI document the
 * ledger serves (served-facts.js), which is generated from the facts' one definition
 * (packages/core/src/facts/submitted-facts.ts): that reading must find them all. Each name it still
 * writes must be a fact or event the ledger records (packages/core/src/domain/events.ts), and every
 * fact it submits one an operator or approver key may record: a renamed or removed fact fails here
 * instead of in an operator's browser.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isSubmittedFactType, LEDGER_EVENT_TYPES, OPERATOR_FACT_TYPES, SUBMITTED_FACTS } from '@recovery-ledger/core';

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

describe('the operator facts the console reads from the served document', () => {
  // served-facts.js is an ES module without imports: its pure reader is evaluated as the browser would.
  const source = readFileSync(join(ASSETS, 'served-facts.js'), 'utf8').replace(/^export /gm, '');
  const operatorFactsOf = new Function(`${source}\nreturn operatorFactsOf;`)() as (document: unknown) => string[];
  const served = JSON.parse(readFileSync(join(__dirname, '../../../openapi.json'), 'utf8')) as unknown;

  it('are every operator fact of the core, and nothing else', () => {
    expect(operatorFactsOf(served).sort()).toEqual([...OPERATOR_FACT_TYPES].sort());
  });

  it('hold every fact an operator action of the console records', () => {
    const actions = named(/fact: '([A-Z][A-Za-z]+)'/g).filter(({ file }) => file === 'operator-actions.js');
    expect(actions.length).toBeGreaterThan(0);
    expect(actions.filter(({ type }) => !operatorFactsOf(served).includes(type))).toEqual([]);
  });
});
