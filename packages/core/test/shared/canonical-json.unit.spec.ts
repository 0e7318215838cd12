import fc from 'fast-check';
import { canonicalJson } from '@recovery-ledger/core';

/** The definition, written plainly: what every hash in the log was computed over. */
function reference(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    const text = JSON.stringify(value);
    return text === undefined ? 'null' : text;
  }
  if (Array.isArray(value))
    return `[${value.map((item) => (item === undefined ? 'null' : reference(item))).join(',')}]`;
  const members: string[] = [];
  for (const key of Object.keys(value).sort()) {
    const member = (value as Record<string, unknown>)[key];
    if (member === undefined || typeof member === 'function') continue;
    members.push(`${JSON.stringify(key)}:${reference(member)}`);
  }
  return `{${members.join(',')}}`;
}

// Keys in and out of order, integer-like keys (which objects list first), keys needing escapes,
// keys beyond the quoted-key memo's length, and the keys every event repeats.
const key = fc.oneof(
  fc.string(),
  fc.constantFrom(
    'type',
    'data',
    'metadata',
    'event_id',
    '1',
    '10',
    '2',
    '__proto__x',
    'a"b',
    'é',
    'é',
    '\u2028',
    'Z',
    'a',
  ),
  fc.string({ minLength: 65, maxLength: 80 }),
  fc.nat().map(String),
);
const leaf = fc.oneof(
  fc.string({ unit: 'binary' }),
  fc.double(),
  fc.integer(),
  fc.constantFrom(-0, 1e21, Number.MAX_SAFE_INTEGER, NaN, Infinity, true, false, null, undefined),
  fc.constant(() => 1),
);
const { tree } = fc.letrec((tie) => ({
  tree: fc.oneof(
    { depthSize: 'small' },
    leaf,
    fc.array(tie('tree'), { maxLength: 5 }),
    fc.dictionary(key, tie('tree'), { maxKeys: 6 }),
  ),
}));

describe('canonical JSON', () => {
  it('is the plain definition, byte for byte, for any value', () => {
    fc.assert(
      fc.property(tree, (value) => {
        expect(canonicalJson(value)).toBe(reference(value));
      }),
      { numRuns: 3000 },
    );
  });

  it('gives the same bytes for the same value whatever order its keys were written in', () => {
    fc.assert(
      fc.property(fc.dictionary(key, leaf, { maxKeys: 8 }), (value) => {
        const reversed = Object.fromEntries(Object.entries(value).reverse());
        expect(canonicalJson(reversed)).toBe(canonicalJson(value));
      }),
    );
  });

  it('is the definition for an object with more keys than the memo of quoted keys holds', () => {
    const many = Object.fromEntries(Array.from({ length: 10_000 }, (_, index) => [`key_${index}`, index]));
    expect(canonicalJson(many)).toBe(reference(many));
  });
});
