import 'reflect-metadata';
import { deepStrictEqual, ok, strictEqual } from 'node:assert/strict';
import { ValidationPipe } from '@nestjs/common';
import fc from 'fast-check';
import type { LedgerConfig } from '../../../src/config/ledger-config';
import { LedgerProblem } from '@recovery-ledger/core/errors/ledger-problem';
import { compileSubmitBody, type BodyCheck } from '../../../src/http/submit-body.validator';
import { SubmitEventsPipe } from '../../../src/http/submit-events.pipe';

/**
 * The compiled submit validator against the DTOs it stands in for. The DTO path is the same pipe
 * with the compiled check answering "no" to every body, so every body goes through class-validator
 * as it did before the compiled check existed.
 *
 * Run by ./submit-body.property.unit.spec.ts in a Node process of its own (through
 * test/chaos/swc-register.cjs): Nest 12 ships ES modules only, which Node loads but Jest's
 * CommonJS runtime cannot, and the DTO path needs the real ValidationPipe.
 */

const MAX_EVENTS = 3;
const config = { maxEventsPerSubmit: MAX_EVENTS } as LedgerConfig;
const compiled = compileSubmitBody();
const fastPipe = new SubmitEventsPipe(config);
const dtoPipe = new SubmitEventsPipe(config);
(dtoPipe as unknown as { compiled: BodyCheck }).compiled = () => false;

type Answer = { ok: true; value: unknown } | { ok: false; code: string; detail: string; extras: unknown };

async function answer(pipe: SubmitEventsPipe, body: unknown): Promise<Answer> {
  try {
    // Each path gets its own copy: Nest's ValidationPipe deletes keys from what it is given.
    return { ok: true, value: await pipe.transform(structuredClone(body)) };
  } catch (error) {
    if (!(error instanceof LedgerProblem)) throw error;
    return { ok: false, code: error.code, detail: error.detail, extras: error.extras };
  }
}

// ---- values ----------------------------------------------------------------------------------------

/** An object with this own key, whatever it is (`__proto__` included), as JSON.parse would build it. */
function withKey(target: Record<string, unknown>, key: string, value: unknown): Record<string, unknown> {
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
  AttemptDispatched: record({ attempt, input_hash: identifier(200) }),
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
  ApprovalRecorded: record({
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
function mutate(target: unknown, path: string[], change: 'set' | 'delete', value: unknown): unknown {
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

const anyBody = fc.oneof(
  { arbitrary: validBody, weight: 3 },
  { arbitrary: mutatedBody, weight: 5 },
  { arbitrary: edge, weight: 1 },
);

/**
 * Where the compiled check is knowingly stricter than the DTOs (the body then takes the DTO path,
 * so the answer is the same): a variation selector in a bounded string.
 */
function knowinglyStricter(body: unknown): boolean {
  return /[\uFE0E\uFE0F]/.test(JSON.stringify(body) ?? '');
}

const RUNS = Number(process.env.SUBMIT_BODY_RUNS ?? 3000);
const SEED = process.env.SUBMIT_BODY_SEED === undefined ? undefined : Number(process.env.SUBMIT_BODY_SEED);
const BASE = {
  events: [
    {
      event_id: '5a7b2d3f-1e8c-4b63-8b54-2d9f3c8e0a21',
      type: 'ApprovalRecorded',
      data: { decision: 'granted', approver: 'alice' },
    },
  ],
};

/** Each check, by name; the process prints what each counted, and fails on the first that fails. */
const CHECKS: Record<string, () => Promise<Record<string, number> | void>> = {
  async 'answers every body exactly as the DTO path does: the same value, or the same code, detail and field'() {
    let fast = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(anyBody, async (body) => {
        const [viaFast, viaDtos] = await Promise.all([answer(fastPipe, body), answer(dtoPipe, body)]);
        deepStrictEqual(viaFast, viaDtos);
        if (compiled(structuredClone(body))) fast += 1;
        if (!viaDtos.ok) refused += 1;
      }),
      { numRuns: RUNS, seed: SEED },
    );
    // Neither side of the comparison is thin: many bodies take the compiled path, many are refused.
    ok(fast > RUNS / 10, `only ${fast} of ${RUNS} bodies passed the compiled check`);
    ok(refused > RUNS / 4, `only ${refused} of ${RUNS} bodies were refused`);
    return { runs: RUNS, compiledAccepted: fast, refused };
  },

  async 'accepts only what the DTOs accept, and refuses what they accept only where it is knowingly stricter'() {
    let both = 0;
    let stricter = 0;
    await fc.assert(
      fc.asyncProperty(anyBody, async (body) => {
        const viaDtos = await answer(dtoPipe, body);
        if (compiled(structuredClone(body))) {
          // Past the shape, only what the schema cannot say: events per submit, one id twice, and
          // (checked before the schema) keys named like Object.prototype members.
          if (!viaDtos.ok)
            ok(
              /^(at most \d+ events per submit|an event_id appears twice in one submit|.* should not exist)$/.test(
                viaDtos.detail,
              ),
              viaDtos.detail,
            );
          else both += 1;
        } else if (viaDtos.ok) {
          ok(knowinglyStricter(body), `the DTOs accept what the compiled check refuses: ${JSON.stringify(body)}`);
          stricter += 1;
        }
      }),
      { numRuns: RUNS, seed: SEED },
    );
    ok(both > RUNS / 20, `only ${both} of ${RUNS} bodies were accepted by both`);
    return { runs: RUNS, acceptedByBoth: both, knowinglyStricter: stricter };
  },

  async 'keeps the data exactly as sent: -0, 1e21, unicode and key order survive, the event_id is lower-cased'() {
    const data = {
      run_id: 'run_1',
      tool: 'create_invoice',
      side_effect: 'write',
      input_hash: 'h',
      input: { z: -0, a: 1e21, s: '😀\u0301', nested: [{ b: 2 ** 53 }] },
    };
    const body = {
      expected_revision: -0,
      events: [{ event_id: '4F6A1C2E-0D7B-4A52-9A43-1C8E2B7D9F10', type: 'StepPlanned', data }],
    };
    ok(compiled(structuredClone(body)));
    const out = await fastPipe.transform(structuredClone(body));
    deepStrictEqual(out, await dtoPipe.transform(structuredClone(body)));
    ok(Object.is(out.expected_revision, -0));
    strictEqual(out.events[0].event_id, '4f6a1c2e-0d7b-4a52-9a43-1c8e2b7d9f10');
    strictEqual(JSON.stringify(out.events[0].data), JSON.stringify(data));
    ok(Object.is((out.events[0].data as { input: { z: number } }).input.z, -0));
  },

  async 'sends a valid body past the DTOs, and an invalid one through them'() {
    const original = ValidationPipe.prototype.transform;
    let calls = 0;
    ValidationPipe.prototype.transform = function counted(
      this: ValidationPipe,
      ...args: Parameters<ValidationPipe['transform']>
    ) {
      calls += 1;
      return original.apply(this, args);
    };
    try {
      const valid = {
        events: [
          {
            event_id: '5a7b2d3f-1e8c-4b63-8b54-2d9f3c8e0a21',
            type: 'AttemptDispatched',
            data: { attempt: 1, input_hash: 'sha256:9c1f' },
          },
        ],
      };
      await fastPipe.transform(structuredClone(valid));
      strictEqual(calls, 0);
      const refused = await answer(fastPipe, mutate(valid, ['events', '0', 'data', 'attempt'], 'set', 0));
      deepStrictEqual(refused, {
        ok: false,
        code: 'BAD_REQUEST',
        detail: 'events[0].data.attempt must not be less than 1',
        extras: { field: 'events[0].data.attempt' },
      });
      strictEqual(calls, 1);
    } finally {
      ValidationPipe.prototype.transform = original;
    }
  },

  async 'refuses near-valid bodies on both paths, with the same detail'() {
    const cases: Array<[string[], unknown, string]> = [
      // A format library's uuid takes a urn:uuid: prefix; the DTO does not.
      [
        ['events', '0', 'event_id'],
        'urn:uuid:5a7b2d3f-1e8c-4b63-8b54-2d9f3c8e0a21',
        'events[0].event_id must not be a version 8 UUID: those are the ids the ledger derives',
      ],
      [['events', '0', 'event_id'], '5a7b2d3f-1e8c-4b63-cb54-2d9f3c8e0a21', 'events[0].event_id must be a UUID'],
      [
        ['events', '0', 'data', 'approver'],
        'a'.repeat(201),
        'events[0].data.approver must be shorter than or equal to 200 characters',
      ],
      [
        ['events', '0', 'event_id'],
        '5a7b2d3f-1e8c-8b63-8b54-2d9f3c8e0a21',
        'events[0].event_id must not be a version 8 UUID: those are the ids the ledger derives',
      ],
      [['events', '0', 'data', 'approver'], '', 'events[0].data.approver must be longer than or equal to 1 characters'],
      [['events', '0', 'extra'], 1, 'events[0].extra property extra should not exist'],
      [['events', '0', 'data', 'extra'], 1, 'events[0].data.extra property extra should not exist'],
      [['events', '0', 'data', 'constructor'], 1, 'events[0].data.constructor should not exist'],
      [
        ['events', '0', 'data', 'reason'],
        'r'.repeat(1001),
        'events[0].data.reason must be shorter than or equal to 1000 characters',
      ],
      [
        ['events', '0', 'data', 'decision'],
        'maybe',
        'events[0].data.decision must be one of the following values: granted, denied',
      ],
      [['expected_revision'], 1.5, 'expected_revision must be an integer number'],
      // The client's own key is taken literally in the message, never as a pattern.
      [['('], 1, '( property ( should not exist'],
      [['events', '0', 'data', 'p.*'], 1, 'events[0].data.p.* property p.* should not exist'],
    ];
    for (const [path, value, detail] of cases) {
      const body = mutate(BASE, path, 'set', value);
      strictEqual(compiled(structuredClone(body)), false, detail);
      const [viaFast, viaDtos] = await Promise.all([answer(fastPipe, body), answer(dtoPipe, body)]);
      deepStrictEqual(viaFast, viaDtos);
      ok(
        !viaFast.ok && viaFast.code === 'BAD_REQUEST' && viaFast.detail === detail,
        `${detail}: ${JSON.stringify(viaFast)}`,
      );
    }
    return { cases: cases.length };
  },

  async 'leaves a string the DTOs measure shorter than JSON Schema does to the DTOs, which accept it'() {
    // validator.js counts a character and its variation selector as one; 200 of them fit in 200.
    const body = mutate(BASE, ['events', '0', 'data', 'approver'], 'set', `${'a'.repeat(199)}a${VS}`);
    strictEqual(compiled(structuredClone(body)), false);
    const [viaFast, viaDtos] = await Promise.all([answer(fastPipe, body), answer(dtoPipe, body)]);
    deepStrictEqual(viaFast, viaDtos);
    strictEqual(viaFast.ok, true);
  },

  async "holds the DTO's array bounds: 10,000 events pass the shape, 10,001 and none do not"() {
    const one = BASE.events[0];
    strictEqual(compiled({ events: Array.from({ length: 10_000 }, () => one) }), true);
    strictEqual(compiled({ events: Array.from({ length: 10_001 }, () => one) }), false);
    strictEqual(compiled({ events: [] }), false);
  },

  async 'leaves a body whose free-form parts hold keys the DTO path deletes to that path'() {
    const envelope = withKey({ ok: true }, 'constructor', 1);
    const body = {
      events: [
        { event_id: '5a7b2d3f-1e8c-4b63-8b54-2d9f3c8e0a21', type: 'EnvelopeRecorded', data: { attempt: 1, envelope } },
      ],
    };
    ok(compiled(structuredClone(body)));
    const [viaFast, viaDtos] = await Promise.all([answer(fastPipe, body), answer(dtoPipe, body)]);
    deepStrictEqual(viaFast, viaDtos);
    deepStrictEqual(viaFast, {
      ok: true,
      value: { events: [{ ...body.events[0], data: { attempt: 1, envelope: { ok: true } } }] },
    });
  },
};

async function main(): Promise<void> {
  const only = process.argv[2];
  for (const [name, check] of Object.entries(CHECKS)) {
    if (only && !name.includes(only)) continue;
    const counted = await check();
    process.stdout.write(`${JSON.stringify({ passed: name, ...(counted ?? {}) })}\n`);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
