/**
 * The operation_ref of a framework's tool call (docs/integrations.md, "The operation_ref rule"):
 * the same run, key, tool and input give the same ref in any process, whatever id the model gave
 * the call; anything that makes it another write gives another ref; it always fits the ledger.
 */
import { MAX_OPERATION_REF_LENGTH, operationRefFor } from '@recovery-ledger/client';

const INPUT = { customer_id: 'cus_1', amount_cents: 1200, currency: 'EUR' };

describe('operationRefFor', () => {
  it('is the same for the same run, tool and input, key order aside', () => {
    const first = operationRefFor({ runId: 'run-1', tool: 'create_invoice', input: INPUT });
    const again = operationRefFor({
      runId: 'run-1',
      tool: 'create_invoice',
      input: { currency: 'EUR', amount_cents: 1200, customer_id: 'cus_1' },
    });
    expect(again).toBe(first);
    expect(first).toMatch(/^run-1\/create_invoice\/[0-9a-f]{32}$/);
  });

  it('differs when the run, the key, the tool or the input differs', () => {
    const base = { runId: 'run-1', tool: 'create_invoice', input: INPUT };
    const refs = new Set([
      operationRefFor(base),
      operationRefFor({ ...base, runId: 'run-2' }),
      operationRefFor({ ...base, key: 'second-invoice' }),
      operationRefFor({ ...base, tool: 'void_invoice' }),
      operationRefFor({ ...base, input: { ...INPUT, amount_cents: 1300 } }),
    ]);
    expect(refs.size).toBe(5);
  });

  it('fits the ledger: at most 200 characters, no control character, its own slashes only', () => {
    const ref = operationRefFor({ runId: `r/${'x'.repeat(400)}\n`, tool: 'create_invoice', input: INPUT });
    expect(ref.length).toBeLessThanOrEqual(MAX_OPERATION_REF_LENGTH);
    expect([...ref].every((char) => char.charCodeAt(0) >= 0x20)).toBe(true);
    expect(ref.split('/')).toHaveLength(2);
  });
});
