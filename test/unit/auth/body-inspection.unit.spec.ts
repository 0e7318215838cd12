import fc from 'fast-check';
import { DEFAULT_BODY_LIMITS, inspectBody } from '../../../src/http/security/body-inspection';

/** Shape limits of every JSON body (src/http/security/body-inspection.ts), applied before validation. */
describe('body inspection', () => {
  /** `levels` objects, each inside the last, around a scalar (a scalar is no level). */
  const nested = (levels: number) => {
    let value: unknown = 1;
    for (let level = 0; level < levels; level++) value = { n: value };
    return value;
  };

  it('accepts 32 levels and refuses 33', () => {
    expect(inspectBody(nested(32))).toBeUndefined();
    expect(inspectBody(nested(33))).toEqual({ field: 'body', reason: 'is nested deeper than 32 levels' });
    expect(inspectBody([nested(31)])).toBeUndefined();
    expect(inspectBody([[nested(31)]])?.reason).toMatch(/nested deeper/);
  });

  it('walks a million levels without recursion', () => {
    let deep: unknown[] = [];
    const root = deep;
    for (let level = 0; level < 1_000_000; level++) {
      const next: unknown[] = [];
      deep.push(next);
      deep = next;
    }
    expect(inspectBody(root)?.reason).toMatch(/nested deeper/);
  });

  it.each(['__proto__', 'constructor', 'prototype'])('refuses the key %s anywhere, naming where', (key) => {
    const body = JSON.parse(`{"events":[{"data":{"result":{"list":[{"${key}":{}}]}}}]}`);
    expect(inspectBody(body)).toEqual({ field: `events[0].data.result.list[0].${key}`, reason: 'is a forbidden key' });
  });

  it('refuses over-long strings and keys, and names the field', () => {
    expect(inspectBody({ a: [{ b: 'x'.repeat(DEFAULT_BODY_LIMITS.maxStringLength + 1) }] })).toEqual({
      field: 'a[0].b',
      reason: `is longer than ${DEFAULT_BODY_LIMITS.maxStringLength} characters`,
    });
    expect(inspectBody({ a: 'x'.repeat(DEFAULT_BODY_LIMITS.maxStringLength) })).toBeUndefined();
    expect(inspectBody({ a: { ['k'.repeat(257)]: 1 } })).toEqual({
      field: 'a',
      reason: 'has a key longer than 256 characters',
    });
  });

  it('names the body instead of echoing a field path that would be huge', () => {
    const key = 'k'.repeat(250);
    expect(inspectBody({ [key]: { [key]: { constructor: 1 } } })?.field).toBe('body');
  });

  it('reports the first violation in document order among siblings', () => {
    expect(inspectBody({ a: { constructor: 1 }, b: { prototype: 1 } })?.field).toBe('a.constructor');
  });

  it('accepts any ordinary JSON value within the limits', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 10 }), (value) => {
        const keys = JSON.stringify(value).match(/"(__proto__|constructor|prototype)":/);
        fc.pre(keys === null);
        expect(inspectBody(value)).toBeUndefined();
      }),
      { seed: 6, numRuns: 500 },
    );
  });
});
