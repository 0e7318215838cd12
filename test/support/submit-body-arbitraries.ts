import fc from 'fast-check';

/**
 * Submit bodies for property tests: valid ones of every fact type, ones a mutation or two away
 * (a key set to an odd value, removed or added anywhere), and odd JSON, with the edges of each
 * bound (lengths around 100, 200 and 1,000, variation selectors, surrogates, -0, 1e21, 2^53),
 * event ids of every version and case, instants on and off the calendar, and keys named like
 * Object.prototype members.
 */

export const MAX_EVENTS = 3;

/** An object with this own key, whatever it is (`__proto__` included), as JSON.parse would build it. */
export function withKey(target: Record<string, unknown>, key: string, value: unknown): Record<string, unknown> {
  const out = { ...target };
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  return out;
}

const VS = '\uFE0F';
const lengths = (n: number) => [n - 1, n, n + 1].filter((x) => x >= 0);
const oddKeys = [
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'valueOf',
  'hasOwnProperty',
  'isPrototypeOf',
  'envelope',
  'result',
  'input',
  'x',
  '',
  'a.envelope',
  'data',
  'type',
  'event_id',
];
const key = fc.oneof(fc.constantFrom(...oddKeys), fc.string({ maxLength: 6 }));
const edgeString = fc.oneof(
  fc.constantFrom(
    '',
    'a',
    ' ',
    'run_1',
    'sha256:9c1f',
    'x y',
    'é',
    '\u0000',
    '\uD800',
    '\uDC00a',
    '😀',
    'a\uFE0F',
    '\uFE0F',
    '\uFE0E\uFE0F',
    'ä',
    'zero\u200Bwidth',
    '1e21',
    '-0',
  ),
  fc
    .constantFrom(...[100, 200, 1000].flatMap(lengths))
    .chain((n) =>
      fc.constantFrom(
        'a'.repeat(n),
        '😀'.repeat(n),
        `${'a'.repeat(Math.max(0, n - 1))}${VS}`,
        `${'☺'.repeat(Math.max(0, n - 1))}☺${VS}`,
        'é'.repeat(n),
        `_${'9'.repeat(Math.max(0, n - 1))}`,
      ),
    ),
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 8 }),
);
const edgeNumber = fc.oneof(
  fc.constantFrom(
    -0,
    0,
    1,
    -1,
    -2,
    2,
    3,
    99,
    100,
    101,
    999,
    1000,
    1001,
    999.5,
    1.5,
    1e21,
    -1e21,
    2 ** 53,
    2 ** 53 + 2,
    -(2 ** 53),
    5e-324,
    86_400_000,
    86_400_001,
    1e300,
  ),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);
const leaf = fc.oneof(edgeString, edgeNumber, fc.boolean(), fc.constant(null));
const json: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    fc.array(tie('value'), { maxLength: 3 }),
    fc
      .array(fc.tuple(key, tie('value')), { maxLength: 3 })
      .map((entries) => entries.reduce<Record<string, unknown>>((o, [k, v]) => withKey(o, k, v), {})),
  ),
})).value;
const edge = fc.oneof(
  leaf,
  json,
  fc.constantFrom([], {}, [1], { a: 1 }, withKey({}, '__proto__', {}), withKey({}, 'constructor', 1)),
);

const hex = (n: number) =>
  fc.string({ unit: fc.constantFrom(...'0123456789abcdefABCDEF'), minLength: n, maxLength: n });
const uuid = fc.oneof(
  fc
    .tuple(
      hex(8),
      hex(4),
      fc.constantFrom('0', '1', '4', '7', '8', '9', 'f', 'F'),
      hex(3),
      fc.constantFrom('8', '9', 'a', 'B', 'c', '0', 'f'),
      hex(3),
      hex(12),
    )
    .map(([a, b, v, c, w, d, e]) => `${a}-${b}-${v}${c}-${w}${d}-${e}`),
  fc.constantFrom(
    '00000000-0000-0000-0000-000000000000',
    'ffffffff-ffff-ffff-ffff-ffffffffffff',
    'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF',
    'urn:uuid:4f6a1c2e-0d7b-4a52-9a43-1c8e2b7d9f10',
    '{4f6a1c2e-0d7b-4a52-9a43-1c8e2b7d9f10}',
    '4f6a1c2e0d7b4a529a431c8e2b7d9f10',
    '4F6A1C2E-0D7B-4A52-9A43-1C8E2B7D9F10',
    '4f6a1c2e-0d7b-4a52-9a43-1c8e2b7d9f10\n',
  ),
);
/** A few fixed ids, in two cases, so one submit often holds the same id twice. */
const pooledId = fc.constantFrom(
  '4f6a1c2e-0d7b-4a52-9a43-1c8e2b7d9f10',
  '4F6A1C2E-0D7B-4A52-9A43-1C8E2B7D9F10',
  '5a7b2d3f-1e8c-4b63-8b54-2d9f3c8e0a21',
);
const validUuid = fc.uuid().map((id) => id.replace(/^(.{14})8/, '$14'));
const eventId = fc.oneof(
  { arbitrary: validUuid, weight: 6 },
  { arbitrary: pooledId, weight: 1 },
  { arbitrary: uuid, weight: 2 },
);

const identifierChar = fc.constantFrom(...'abcXYZ019_.:/@+=#~-');
const identifier = (max: number) =>
  fc.oneof(
    {
      arbitrary: fc
        .tuple(fc.constantFrom('a', 'Z', '0', '_'), fc.string({ unit: identifierChar, maxLength: 8 }))
        .map(([a, b]) => a + b),
      weight: 8,
    },
    { arbitrary: fc.constantFrom('a'.repeat(max), '_'.repeat(max)), weight: 1 },
    { arbitrary: fc.constantFrom('a'.repeat(max + 1), '-a', '.a', 'a b', 'ä', ''), weight: 1 },
  );
const instant = fc.oneof(
  fc
    .date({ min: new Date('0001-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true })
    .map((d) => d.toISOString()),
  fc.constantFrom(
    '2026-02-28T10:00:00Z',
    '2028-02-29T23:59:59.123456789+14:00',
    '2026-12-03T06:00:00-05:30',
    '2026-01-01t00:00:00z',
    '2026-02-30T10:00:00Z',
    '2026-02-28T10:00:00',
    '2026-02-28',
    '2026-06-30T23:59:60Z',
    '2026-02-28T10:00:00+24:00',
    '+002026-02-28T10:00:00Z',
    '2026-02-28T10:00:00.1234567890Z',
  ),
);
const optional = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined, freq: 2 });
const record = (shape: Record<string, fc.Arbitrary<unknown>>) =>
  fc.record(shape).map((value) => Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)));

const policy = record({
  max_attempts: optional(fc.integer({ min: 1, max: 100 })),
  consistency_window_ms: optional(fc.integer({ min: 0, max: 86_400_000 })),
  verification_tool: optional(identifier(100)),
  max_consecutive_dependency_failures: optional(fc.integer({ min: 1, max: 100 })),
  dispatch_timeout_ms: optional(fc.integer({ min: 1000, max: 86_400_000 })),
});
const attempt = fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.constantFrom(1, 1000));
const DATA: Record<string, fc.Arbitrary<Record<string, unknown>>> = {
  StepPlanned: record({
    run_id: identifier(200),
    tool: identifier(100),
    side_effect: fc.constantFrom('read', 'write'),
    input_hash: identifier(200),
    policy: optional(policy),
    input: optional(json),
  }),
  AttemptDispatched: record({
    attempt,
    input_hash: identifier(200),
    call_window_ms: optional(fc.oneof(fc.integer({ min: 1, max: 86_400_000 }), edgeNumber)),
  }),
  EnvelopeRecorded: record({
    attempt,
    envelope: fc.oneof(
      json.map((v) => (v !== null && typeof v === 'object' && !Array.isArray(v) ? v : { ok: true, value: v })),
      fc.constant({ ok: false, code: 'OUTCOME_UNKNOWN', category: 'dependency', commit_state: 'unknown' }),
    ),
  }),
  VerificationRecorded: record({
    outcome: fc.constantFrom('found_committed', 'not_found', 'lookup_unavailable'),
    checked_at: instant,
    evidence_ref: optional(
      fc.oneof(
        { arbitrary: fc.string({ minLength: 1, maxLength: 20 }), weight: 4 },
        { arbitrary: edgeString, weight: 1 },
      ),
    ),
    result: optional(json),
  }),
  OutcomeVerifiedManually: record({
    outcome: fc.constantFrom('found_committed', 'not_found', 'lookup_unavailable'),
    note: fc.oneof(
      { arbitrary: fc.string({ minLength: 1, maxLength: 20 }), weight: 4 },
      { arbitrary: edgeString, weight: 1 },
    ),
    evidence_ref: optional(
      fc.oneof(
        { arbitrary: fc.string({ minLength: 1, maxLength: 20 }), weight: 4 },
        { arbitrary: edgeString, weight: 1 },
      ),
    ),
  }),
  StepCancelled: record({
    reason: fc.oneof(
      { arbitrary: fc.string({ minLength: 1, maxLength: 20 }), weight: 4 },
      { arbitrary: edgeString, weight: 1 },
    ),
  }),
  StepReopened: record({
    attempts: fc.oneof(fc.integer({ min: 1, max: 10 }), edgeNumber),
    reason: fc.string({ minLength: 1, maxLength: 20 }),
  }),
  EscalationAcknowledged: record({
    assignee: fc.oneof(
      { arbitrary: fc.string({ minLength: 1, maxLength: 20 }), weight: 4 },
      { arbitrary: edgeString, weight: 1 },
    ),
    note: optional(fc.string({ maxLength: 20 })),
  }),
  ApprovalRecorded: record({
    input_hash: optional(identifier(200)),
    decision: fc.constantFrom('granted', 'denied'),
    approver: fc.oneof(
      { arbitrary: fc.string({ minLength: 1, maxLength: 20 }), weight: 4 },
      { arbitrary: edgeString, weight: 1 },
    ),
    reason: optional(
      fc.oneof({ arbitrary: fc.string({ maxLength: 20 }), weight: 4 }, { arbitrary: edgeString, weight: 1 }),
    ),
  }),
};
const TYPES = Object.keys(DATA);

/** A valid-looking event of any type. */
const event = fc
  .constantFrom(...TYPES)
  .chain((type) => fc.record({ event_id: eventId, type: fc.constant(type), data: DATA[type] }));

/** One change somewhere in an object: a key set to an odd value, removed, or added. */
export function mutate(target: unknown, path: string[], change: 'set' | 'delete', value: unknown): unknown {
  if (target === null || typeof target !== 'object') return target;
  const copy: Record<string, unknown> = Array.isArray(target)
    ? ([...target] as unknown as Record<string, unknown>)
    : { ...target };
  const [head, ...rest] = path;
  if (rest.length > 0) {
    copy[head] = mutate(copy[head], rest, change, value);
    return copy;
  }
  if (Array.isArray(copy)) {
    // Only what JSON can say: no holes, no named members on an array.
    const index = Number(head);
    if (!/^\d+$/.test(head) || index > copy.length) return copy;
    if (change === 'delete') copy.splice(index, 1);
    else copy[index] = value;
    return copy;
  }
  if (change === 'delete') {
    delete copy[head];
    return copy;
  }
  return withKey(copy, head, value);
}

/** The paths of every key in a body, so a mutation can land anywhere in it. */
function pathsOf(value: unknown, prefix: string[] = []): string[][] {
  if (value === null || typeof value !== 'object') return [];
  return Object.keys(value).flatMap((k) => [
    [...prefix, k],
    ...pathsOf((value as Record<string, unknown>)[k], [...prefix, k]),
  ]);
}

const validBody = fc
  .record({
    expected_revision: optional(fc.oneof(fc.integer({ min: -1, max: 50 }), fc.constantFrom(-0, 1e21, 2 ** 53))),
    events: fc.oneof(
      { arbitrary: fc.array(event, { minLength: 1, maxLength: MAX_EVENTS }), weight: 5 },
      { arbitrary: fc.array(event, { minLength: 0, maxLength: MAX_EVENTS + 1 }), weight: 1 },
    ),
  })
  .map((value) => Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)));

const mutatedBody = fc
  .tuple(
    validBody,
    fc.array(
      fc.tuple(fc.nat(), fc.constantFrom('set', 'delete', 'add') as fc.Arbitrary<'set' | 'delete' | 'add'>, key, edge),
      { minLength: 1, maxLength: 2 },
    ),
  )
  .map(([body, changes]) =>
    changes.reduce<unknown>((current, [at, change, newKey, value]) => {
      const paths = pathsOf(current);
      if (paths.length === 0) return current;
      const path = paths[at % paths.length];
      if (change === 'add') {
        const parent = path.slice(0, -1);
        return mutate(current, [...parent, newKey], 'set', value);
      }
      return mutate(current, path, change, value);
    }, body),
  );

export const anyBody = fc.oneof(
  { arbitrary: validBody, weight: 3 },
  { arbitrary: mutatedBody, weight: 5 },
  { arbitrary: edge, weight: 1 },
);
