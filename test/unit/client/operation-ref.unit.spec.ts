/**
 * The operation_ref of a step (docs/integrations.md, "The operation_ref rule"): the same parts give
 * the same ref in any process; different parts never share one (encoded, not replaced; hashed
 * when too long); every ref fits the ledger and the identifier grammar.
 */
import fc from 'fast-check';
import { MAX_OPERATION_REF_LENGTH, operationRefFor, type OperationRefParts } from '@recovery-ledger/client';
import { canonicalJson, IDENTIFIER_PATTERN } from '@recovery-ledger/core';

const INPUT = { customer_id: 'cus_1', amount_cents: 1200, currency: 'EUR' };

/** Parts as any caller may pass them: any UTF-16 text (lone surrogates too), long ones included. */
const text = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.string({ unit: fc.constantFrom('a', '_', '/', '~', '-', '.', 'é', '\n', 'h', '2'), maxLength: 250 }),
);
const parts: fc.Arbitrary<OperationRefParts> = fc.record(
  {
    runId: text,
    tool: text,
    key: text,
    step: fc.nat(),
    input: fc.oneof(fc.constant(INPUT), fc.record({ currency: fc.constantFrom('EUR', 'eur') })),
  },
  { requiredKeys: ['runId', 'tool'] },
);
/** Two part sets name the same step only when every part is equal (the input by its canonical JSON). */
const same = (a: OperationRefParts, b: OperationRefParts) =>
  a.runId === b.runId &&
  a.tool === b.tool &&
  a.key === b.key &&
  a.step === b.step &&
  (a.input === undefined) === (b.input === undefined) &&
  (a.input === undefined || canonicalJson(a.input) === canonicalJson(b.input));

describe('operationRefFor', () => {
  it('is the same for the same parts, key order of the input aside', () => {
    const first = operationRefFor({ runId: 'run-1', tool: 'create_invoice', input: INPUT });
    const again = operationRefFor({
      runId: 'run-1',
      tool: 'create_invoice',
      input: { currency: 'EUR', amount_cents: 1200, customer_id: 'cus_1' },
    });
    expect(again).toBe(first);
    expect(first).toMatch(/^run-1\/create_invoice\/[0-9a-f]{32}$/);
    expect(operationRefFor({ runId: 'run-1', tool: 'create_invoice', step: 1 })).toBe('run-1/create_invoice/s.1');
  });

  it('is injective: different runs, tools, keys, steps or inputs never share a ref', () => {
    // The collisions a replacing or truncating encoding made: one run's write became another's.
    expect(operationRefFor({ runId: 'acme/t-1', tool: 'create_invoice', step: 1 })).not.toBe(
      operationRefFor({ runId: 'acme_t-1', tool: 'create_invoice', step: 1 }),
    );
    const long = 'r'.repeat(167);
    expect(operationRefFor({ runId: `${long}-a`, tool: 'create_invoice', input: INPUT })).not.toBe(
      operationRefFor({ runId: `${long}-b`, tool: 'create_invoice', input: INPUT }),
    );
    fc.assert(
      fc.property(parts, parts, (a, b) => {
        fc.pre(!same(a, b));
        expect(operationRefFor(a)).not.toBe(operationRefFor(b));
      }),
      { numRuns: 5000 },
    );
  });

  it('fits the ledger: at most 200 characters of the identifier grammar', () => {
    fc.assert(
      fc.property(parts, (p) => {
        const ref = operationRefFor(p);
        expect(ref.length).toBeLessThanOrEqual(MAX_OPERATION_REF_LENGTH);
        expect(ref).toMatch(IDENTIFIER_PATTERN);
        expect(operationRefFor({ ...p })).toBe(ref);
      }),
      { numRuns: 2000 },
    );
  });
});
