/**
 * Malformed input over real HTTP: several hundred bodies, generated with fast-check from a fixed
 * seed, each broken in one known way (a wrong type, a missing or unknown field, broken JSON text,
 * an over-long string, a bad uuid, an envelope breaking one rule of docs/contract.md §2, a prototype key, a
 * wrong content type, a bad ref, a body over the size limit). Every broken body is sent against
 * planned, dispatched and unplanned operations, where the same body *without* its defect would be
 * accepted and stored: so "the events table is unchanged" really proves the defect was caught.
 *
 * Every answer must be a typed 4xx problem (never a 5xx), with a code from the error registry;
 * 400s and 422s must name the field; and each case must get the status/code/field its defect calls
 * for. Answers are collected once (beforeAll) and judged by several tests, each listing every case
 * that breaks its rule, so one run shows all the defects at once.
 */
import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { ERROR_REGISTRY } from '@recovery-ledger/core';
import { ledgerAt, opPath } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';
import { PROBLEM, dumpEvents, envelopes, inMs, ok, operation } from '../support/scenario';

/** A client's event id: any UUID version but 8, which the ledger keeps for the ids it derives. */
const clientUuid = fc.uuid({ version: [1, 2, 3, 4, 5, 6, 7] });

const SEED = 20261202;

interface Expectation {
  status: number[];
  code?: string[];
  /** The field the answer must name (one of these); undefined: any field, when a field is due. */
  field?: string[];
}

interface Case {
  category: string;
  label: string;
  method?: 'POST' | 'GET';
  path: string;
  body?: string;
  /** undefined: application/json; null: no content-type header at all. */
  contentType?: string | null;
  /** Over-limit bodies: sent by hand, declared by content-length or streamed chunked (see sendOverLimit). */
  overLimit?: { limit: number; framing: 'content-length' | 'chunked' };
  expect: Expectation;
}

interface Answer {
  status: number;
  contentType: string;
  text: string;
  body: any;
}

const REFS = {
  unplanned: 'run_m/unplanned',
  planned: 'run_m/planned',
  dispatched: 'run_m/dispatched',
  readPlanned: 'run_m/read-planned',
};
type Target = keyof typeof REFS;
const WRITE_TARGETS: Target[] = ['unplanned', 'planned', 'dispatched'];
const ALL_TARGETS: Target[] = [...WRITE_TARGETS, 'readPlanned'];
const eventsPath = (ref: string) => `${opPath(ref)}/events`;

const BAD_REQUEST = (field?: string | string[]): Expectation => ({
  status: [400],
  code: ['BAD_REQUEST'],
  ...(field === undefined ? {} : { field: Array.isArray(field) ? field : [field] }),
});
const ENVELOPE_INVALID = (field: string | string[]): Expectation => ({
  status: [422],
  code: ['ENVELOPE_INVALID'],
  field: (Array.isArray(field) ? field : [field]).map((f) => `events[0].data.envelope.${f}`),
});

// ---- valid bodies: what each defect is applied to ------------------------------------------------

type Json = any;
const FACT_TYPES = [
  'StepPlanned',
  'AttemptDispatched',
  'EnvelopeRecorded',
  'VerificationRecorded',
  'ApprovalRecorded',
] as const;
type FactType = (typeof FACT_TYPES)[number];

const ident = fc.stringMatching(/^[a-z][a-z0-9_]{0,20}$/);
const instant = fc
  .date({ min: new Date('2020-01-01'), max: new Date('2030-01-01'), noInvalidDate: true })
  .map((d) => d.toISOString());

function validEnvelope(ref: string): fc.Arbitrary<Json> {
  return fc.constantFrom(
    envelopes.success(ref),
    envelopes.invalidRecipient(ref),
    envelopes.outcomeUnknown(ref),
    envelopes.missingApproval(ref),
    envelopes.outage(ref, inMs(60_000)),
  );
}

function validData(type: FactType, ref: string): fc.Arbitrary<Json> {
  switch (type) {
    case 'StepPlanned':
      return fc.record({
        run_id: ident,
        tool: ident,
        side_effect: fc.constantFrom('read', 'write'),
        input_hash: ident.map((s) => `sha256:${s}`),
        policy: fc.record({
          max_attempts: fc.integer({ min: 1, max: 100 }),
          consistency_window_ms: fc.integer({ min: 0, max: 1_000_000 }),
        }),
      });
    case 'AttemptDispatched':
      return fc.record({ attempt: fc.integer({ min: 1, max: 5 }), input_hash: ident.map((s) => `sha256:${s}`) });
    case 'EnvelopeRecorded':
      return fc.record({ attempt: fc.constant(1), envelope: validEnvelope(ref) });
    case 'VerificationRecorded':
      return fc.record({
        outcome: fc.constantFrom('found_committed', 'not_found', 'lookup_unavailable'),
        checked_at: instant,
      });
    case 'ApprovalRecorded':
      return fc.record({ decision: fc.constantFrom('granted', 'denied'), approver: ident });
  }
}

const validBody = (type: FactType, ref: string) =>
  fc.record({
    events: fc.tuple(fc.record({ event_id: clientUuid, type: fc.constant(type), data: validData(type, ref) })),
  });

const anyFact = fc.constantFrom(...FACT_TYPES);
const targetArb = (targets: Target[]) => fc.constantFrom(...targets);
const clone = (value: Json): Json => JSON.parse(JSON.stringify(value));

/** A case whose body is a JSON value built from a valid body by `mutate`. */
function jsonCase(category: string, label: string, target: Target, body: Json, expectation: Expectation): Case {
  return {
    category,
    label: `${label} @${target}`,
    path: eventsPath(REFS[target]),
    body: JSON.stringify(body),
    expect: expectation,
  };
}

// ---- the defects ----------------------------------------------------------------------------------

const REQUIRED: Record<FactType, string[]> = {
  StepPlanned: ['run_id', 'tool', 'side_effect', 'input_hash'],
  AttemptDispatched: ['attempt', 'input_hash'],
  EnvelopeRecorded: ['attempt', 'envelope'],
  VerificationRecorded: ['outcome', 'checked_at'],
  ApprovalRecorded: ['decision', 'approver'],
};
const STRING_FIELDS: Record<FactType, string[]> = {
  StepPlanned: ['run_id', 'tool', 'side_effect', 'input_hash'],
  AttemptDispatched: ['input_hash'],
  EnvelopeRecorded: [],
  VerificationRecorded: ['outcome', 'checked_at'],
  ApprovalRecorded: ['decision', 'approver'],
};
const notAString = fc.oneof(
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.constant([]),
  fc.constant({}),
  fc.constant(['x']),
);
const notAnInteger = fc.oneof(
  fc.constant('1'),
  fc.constant(1.5),
  fc.boolean(),
  fc.constant(null),
  fc.constant([]),
  fc.constant({}),
);
const notAnObject = fc.oneof(fc.integer(), fc.string(), fc.boolean(), fc.constant([]), fc.constant([{}]));

const wrongTypes: fc.Arbitrary<Case> = fc.oneof(
  // The body itself is not an object.
  fc
    .oneof(fc.constant([]), fc.integer(), fc.string(), fc.boolean(), fc.constant(null))
    .chain((body) =>
      targetArb(ALL_TARGETS).map((t) =>
        jsonCase('wrong-type', `body=${JSON.stringify(body).slice(0, 20)}`, t, body, BAD_REQUEST('body')),
      ),
    ),
  fc
    .tuple(targetArb(ALL_TARGETS), anyFact, fc.oneof(fc.constant({}), fc.string(), fc.integer(), fc.constant(null)))
    .chain(([t, type, events]) =>
      validBody(type, REFS[t]).map((body) =>
        jsonCase('wrong-type', 'events', t, { ...body, events }, BAD_REQUEST('events')),
      ),
    ),
  // null included: an optional field is left out, never sent as null.
  fc
    .tuple(
      targetArb(ALL_TARGETS),
      anyFact,
      fc.oneof(fc.constant('1'), fc.constant(1.5), fc.boolean(), fc.constant({}), fc.constant([0]), fc.constant(null)),
    )
    .chain(([t, type, rev]) =>
      validBody(type, REFS[t]).map((body) =>
        jsonCase(
          'wrong-type',
          'expected_revision',
          t,
          { ...body, expected_revision: rev },
          BAD_REQUEST('expected_revision'),
        ),
      ),
    ),
  fc
    .tuple(targetArb(ALL_TARGETS), anyFact, fc.constantFrom('event_id', 'type', 'data'), notAnObject)
    .chain(([t, type, key, value]) =>
      validBody(type, REFS[t]).map((body) => {
        const copy = clone(body);
        copy.events[0][key] = key === 'data' ? value : typeof value === 'string' ? 42 : value;
        return jsonCase('wrong-type', `events[0].${key}`, t, copy, BAD_REQUEST(`events[0].${key}`));
      }),
    ),
  fc.tuple(targetArb(ALL_TARGETS), anyFact).chain(([t, type]) =>
    fc
      .tuple(
        validBody(type, REFS[t]),
        fc.constantFrom(...(STRING_FIELDS[type].length ? STRING_FIELDS[type] : ['attempt'])),
        notAString,
        notAnInteger,
      )
      .map(([body, key, nonString, nonInteger]) => {
        const copy = clone(body);
        copy.events[0].data[key] = key === 'attempt' ? nonInteger : nonString;
        return jsonCase('wrong-type', `${type}.${key}`, t, copy, BAD_REQUEST(`events[0].data.${key}`));
      }),
  ),
  fc
    .tuple(
      targetArb(ALL_TARGETS),
      fc.oneof(
        notAnObject.filter((v) => !Array.isArray(v) || v.length > 0),
        fc.constant(null),
      ),
    )
    .chain(([t, policy]) =>
      validBody('StepPlanned', REFS[t]).map((body) => {
        const copy = clone(body);
        copy.events[0].data.policy = policy;
        return jsonCase('wrong-type', 'policy', t, copy, BAD_REQUEST('events[0].data.policy'));
      }),
    ),
  fc
    .tuple(
      targetArb(ALL_TARGETS),
      fc.constantFrom('max_attempts', 'consistency_window_ms', 'max_consecutive_dependency_failures'),
      fc.constantFrom('3', 2.5, true, [], {}, null),
    )
    .chain(([t, key, value]) =>
      validBody('StepPlanned', REFS[t]).map((body) => {
        const copy = clone(body);
        copy.events[0].data.policy[key] = value;
        return jsonCase('wrong-type', `policy.${key}`, t, copy, BAD_REQUEST(`events[0].data.policy.${key}`));
      }),
    ),
  fc
    .tuple(targetArb(WRITE_TARGETS), fc.oneof(fc.string(), fc.integer(), fc.constant([]), fc.boolean()))
    .map(([t, envelope]) =>
      jsonCase(
        'wrong-type',
        'envelope',
        t,
        { events: [{ event_id: randomUUID(), type: 'EnvelopeRecorded', data: { attempt: 1, envelope } }] },
        BAD_REQUEST('events[0].data.envelope'),
      ),
    ),
);

const missingFields: fc.Arbitrary<Case> = fc.oneof(
  fc
    .tuple(targetArb(ALL_TARGETS), anyFact)
    .chain(([t, type]) =>
      validBody(type, REFS[t]).map(() =>
        jsonCase('missing', 'events', t, { expected_revision: 1 }, BAD_REQUEST('events')),
      ),
    ),
  fc.tuple(targetArb(ALL_TARGETS), anyFact, fc.constantFrom('event_id', 'type', 'data')).chain(([t, type, key]) =>
    validBody(type, REFS[t]).map((body) => {
      const copy = clone(body);
      delete copy.events[0][key];
      return jsonCase('missing', `events[0].${key}`, t, copy, BAD_REQUEST(`events[0].${key}`));
    }),
  ),
  fc.tuple(targetArb(ALL_TARGETS), anyFact).chain(([t, type]) =>
    fc.tuple(validBody(type, REFS[t]), fc.constantFrom(...REQUIRED[type])).map(([body, key]) => {
      const copy = clone(body);
      delete copy.events[0].data[key];
      return jsonCase('missing', `${type}.${key}`, t, copy, BAD_REQUEST(`events[0].data.${key}`));
    }),
  ),
  // A write's error envelope needs every field of the contract's ToolError (docs/contract.md §2).
  fc
    .tuple(
      targetArb(WRITE_TARGETS),
      fc.constantFrom(
        'code',
        'category',
        'commit_state',
        'retry',
        'next_action',
        'operation_ref',
        'safe_details',
        'agent_message',
        'user_message',
      ),
    )
    .map(([t, key]) => {
      const envelope: Json = clone(envelopes.outcomeUnknown(REFS[t]));
      delete envelope[key];
      return jsonCase('missing', `envelope.${key}`, t, envelopeBody(envelope), ENVELOPE_INVALID(key));
    }),
  fc
    .tuple(targetArb(WRITE_TARGETS), fc.constantFrom('ok', 'operation_ref', 'commit_state', 'result', 'verification'))
    .map(([t, key]) => {
      const envelope: Json = clone(envelopes.success(REFS[t]));
      delete envelope[key];
      return jsonCase('missing', `success.${key}`, t, envelopeBody(envelope), ENVELOPE_INVALID(key));
    }),
);

function envelopeBody(envelope: Json, attempt: Json = 1): Json {
  return { events: [{ event_id: randomUUID(), type: 'EnvelopeRecorded', data: { attempt, envelope } }] };
}

const KNOWN_KEYS = new Set([
  'events',
  'expected_revision',
  'event_id',
  'type',
  'data',
  'run_id',
  'tool',
  'side_effect',
  'input_hash',
  'policy',
  'attempt',
  'envelope',
  'outcome',
  'checked_at',
  'evidence_ref',
  'result',
  'decision',
  'approver',
  'reason',
  'max_attempts',
  'consistency_window_ms',
  'verification_tool',
  'max_consecutive_dependency_failures',
  'ok',
  'code',
  'category',
  'commit_state',
  'retry',
  'next_action',
  'operation_ref',
  'safe_details',
  'agent_message',
  'user_message',
  'directive',
  'not_before',
  'max_attempts_remaining',
  'verification',
  'field',
  'allowed_values',
  'retry_after',
  'resource_version',
  'limit',
  'input',
  'dispatch_timeout_ms',
]);
const PROTOTYPE_NAMES = Object.getOwnPropertyNames(Object.prototype);
const unknownKey = fc
  .stringMatching(/^[a-z][a-z_]{2,15}$/)
  .filter((key) => !KNOWN_KEYS.has(key) && !PROTOTYPE_NAMES.includes(key));

const unknownFields: fc.Arbitrary<Case> = fc.oneof(
  fc
    .tuple(targetArb(ALL_TARGETS), anyFact, unknownKey)
    .chain(([t, type, key]) =>
      validBody(type, REFS[t]).map((body) =>
        jsonCase('unknown', `body.${key}`, t, { ...body, [key]: 1 }, BAD_REQUEST(key)),
      ),
    ),
  fc.tuple(targetArb(ALL_TARGETS), anyFact, unknownKey).chain(([t, type, key]) =>
    validBody(type, REFS[t]).map((body) => {
      const copy = clone(body);
      copy.events[0][key] = 'x';
      return jsonCase('unknown', `events[0].${key}`, t, copy, BAD_REQUEST(`events[0].${key}`));
    }),
  ),
  fc.tuple(targetArb(ALL_TARGETS), anyFact, unknownKey).chain(([t, type, key]) =>
    validBody(type, REFS[t]).map((body) => {
      const copy = clone(body);
      copy.events[0].data[key] = true;
      return jsonCase('unknown', `${type}.${key}`, t, copy, BAD_REQUEST(`events[0].data.${key}`));
    }),
  ),
  fc.tuple(targetArb(ALL_TARGETS), unknownKey).chain(([t, key]) =>
    validBody('StepPlanned', REFS[t]).map((body) => {
      const copy = clone(body);
      copy.events[0].data.policy[key] = 5;
      return jsonCase('unknown', `policy.${key}`, t, copy, BAD_REQUEST(`events[0].data.policy.${key}`));
    }),
  ),
  fc.tuple(targetArb(WRITE_TARGETS), unknownKey, fc.constantFrom('', 'retry.', 'safe_details.')).map(([t, key, at]) => {
    const envelope: Json = clone(envelopes.outcomeUnknown(REFS[t]));
    if (at === '') envelope[key] = 'x';
    else envelope[at.slice(0, -1)][key] = 'x';
    return jsonCase('unknown', `envelope.${at}${key}`, t, envelopeBody(envelope), ENVELOPE_INVALID(`${at}${key}`));
  }),
  fc.tuple(targetArb(WRITE_TARGETS), unknownKey, fc.boolean()).map(([t, key, inVerification]) => {
    const envelope: Json = clone(envelopes.success(REFS[t]));
    if (inVerification) envelope.verification[key] = 'x';
    else envelope[key] = 'x';
    return jsonCase(
      'unknown',
      `success.${inVerification ? 'verification.' : ''}${key}`,
      t,
      envelopeBody(envelope),
      ENVELOPE_INVALID(`${inVerification ? 'verification.' : ''}${key}`),
    );
  }),
);

const parses = (text: string) => {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
};

const brokenJson: fc.Arbitrary<Case> = fc
  .tuple(targetArb(ALL_TARGETS), anyFact)
  .chain(([t, type]) =>
    fc.tuple(
      fc.constant(t),
      validBody(type, REFS[t]).map((body) => JSON.stringify(body)),
      fc.nat(),
      fc.constantFrom(
        'truncate',
        'single-quotes',
        'insert',
        'trailing-comma',
        'unquoted-key',
        'comment',
        'garbage-after',
        'drop-colon',
        'nan',
      ),
      fc.constantFrom('{', '}', '[', ']', ',', ':', '"', '\\', 'x', '\u0000'),
    ),
  )
  .map(([t, text, n, how, char]) => {
    const at = n % text.length;
    const broken = {
      truncate: text.slice(0, at),
      'single-quotes': text.replace(/"/g, "'"),
      insert: `${text.slice(0, at)}${char}${text.slice(at)}`,
      'trailing-comma': text.replace(/}\]}$/, '},]}'),
      'unquoted-key': text.replace('"events"', 'events'),
      comment: text.replace('[', '[/* note */'),
      'garbage-after': `${text} ${char}x`,
      'drop-colon': text.replace(':', ' '),
      nan: text.replace(/:(\d+)/, ':NaN'),
    }[how];
    return { broken, t, how };
  })
  .filter(({ broken }) => !parses(broken))
  .map(({ broken, t, how }) => ({
    category: 'broken-json',
    label: `${how} @${t}`,
    path: eventsPath(REFS[t]),
    body: broken,
    expect: BAD_REQUEST('body'),
  }));

const LIMITS: Array<{ type: FactType; key: string; max: number; char: string }> = [
  { type: 'StepPlanned', key: 'run_id', max: 200, char: 'r' },
  { type: 'StepPlanned', key: 'tool', max: 100, char: 't' },
  { type: 'StepPlanned', key: 'input_hash', max: 200, char: 'h' },
  { type: 'AttemptDispatched', key: 'input_hash', max: 200, char: 'h' },
  { type: 'ApprovalRecorded', key: 'approver', max: 200, char: 'a' },
  { type: 'ApprovalRecorded', key: 'reason', max: 1000, char: 'w' },
  { type: 'VerificationRecorded', key: 'evidence_ref', max: 200, char: 'e' },
];
const ENVELOPE_LIMITS: Array<{ path: string; max: number; char: string }> = [
  { path: 'agent_message', max: 500, char: 'm' },
  { path: 'user_message', max: 500, char: 'u' },
  { path: 'code', max: 64, char: 'C' },
  { path: 'safe_details.verification_tool', max: 256, char: 'v' },
];

const hugeStrings: fc.Arbitrary<Case> = fc.oneof(
  fc
    .tuple(targetArb(ALL_TARGETS), fc.constantFrom(...LIMITS), fc.integer({ min: 1, max: 60_000 }))
    .chain(([t, limit, extra]) =>
      validBody(limit.type, REFS[t]).map((body) => {
        const copy = clone(body);
        copy.events[0].data[limit.key] = limit.char.repeat(limit.max + extra);
        return jsonCase(
          'huge-string',
          `${limit.type}.${limit.key}+${extra}`,
          t,
          copy,
          BAD_REQUEST(`events[0].data.${limit.key}`),
        );
      }),
    ),
  fc.tuple(targetArb(ALL_TARGETS), fc.integer({ min: 1, max: 20_000 })).chain(([t, extra]) =>
    validBody('StepPlanned', REFS[t]).map((body) => {
      const copy = clone(body);
      copy.events[0].data.policy.verification_tool = 'v'.repeat(100 + extra);
      return jsonCase(
        'huge-string',
        `policy.verification_tool+${extra}`,
        t,
        copy,
        BAD_REQUEST('events[0].data.policy.verification_tool'),
      );
    }),
  ),
  fc
    .tuple(targetArb(WRITE_TARGETS), fc.constantFrom(...ENVELOPE_LIMITS), fc.integer({ min: 1, max: 60_000 }))
    .map(([t, limit, extra]) => {
      const envelope: Json = clone(envelopes.outcomeUnknown(REFS[t]));
      const [head, tail] = limit.path.split('.');
      if (tail) envelope[head][tail] = limit.char.repeat(limit.max + extra);
      else envelope[head] = limit.char.repeat(limit.max + extra);
      return jsonCase(
        'huge-string',
        `envelope.${limit.path}+${extra}`,
        t,
        envelopeBody(envelope),
        ENVELOPE_INVALID(limit.path),
      );
    }),
);

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const badUuid = fc
  .oneof(
    fc
      .tuple(
        clientUuid,
        fc.constantFrom('no-hyphens', 'bad-char', 'short', 'long', 'braces', 'urn', 'spaces', 'underscores'),
        fc.nat(),
      )
      .map(([uuid, how, n]) => {
        const at = n % uuid.length;
        return {
          'no-hyphens': uuid.replace(/-/g, ''),
          'bad-char': `${uuid.slice(0, at)}g${uuid.slice(at + 1)}`,
          short: uuid.slice(0, -1 - (n % 5)),
          long: `${uuid}${'a'.repeat(1 + (n % 3))}`,
          braces: `{${uuid}}`,
          urn: `urn:uuid:${uuid}`,
          spaces: ` ${uuid} `,
          underscores: uuid.replace(/-/g, '_'),
        }[how];
      }),
    fc.string({ maxLength: 40 }),
  )
  .filter((id) => !UUID_PATTERN.test(id));

const badUuids: fc.Arbitrary<Case> = fc.oneof(
  fc.tuple(targetArb(ALL_TARGETS), anyFact, badUuid).chain(([t, type, id]) =>
    validBody(type, REFS[t]).map((body) => {
      const copy = clone(body);
      copy.events[0].event_id = id;
      return jsonCase(
        'bad-uuid',
        `event_id=${JSON.stringify(id).slice(0, 24)}`,
        t,
        copy,
        BAD_REQUEST('events[0].event_id'),
      );
    }),
  ),
  // The same event_id twice in one submit: refused as a whole, not half applied.
  fc.tuple(targetArb(ALL_TARGETS), clientUuid).map(([t, id]) =>
    jsonCase(
      'bad-uuid',
      'duplicate event_id in one submit',
      t,
      {
        events: [
          { event_id: id, type: 'AttemptDispatched', data: { attempt: 1, input_hash: 'h1' } },
          { event_id: id, type: 'AttemptDispatched', data: { attempt: 2, input_hash: 'h2' } },
        ],
      },
      BAD_REQUEST('events[1].event_id'),
    ),
  ),
);

/** One rule of docs/contract.md §2 broken per case; `fields` is where the ledger must point. */
function envelopeRule(label: string, build: (ref: string) => Json, fields: string | string[]): fc.Arbitrary<Case> {
  return targetArb(WRITE_TARGETS).map((t) =>
    jsonCase('envelope-rule', label, t, envelopeBody(build(REFS[t])), ENVELOPE_INVALID(fields)),
  );
}
const unknownOf = (ref: string) => clone(envelopes.outcomeUnknown(ref));
const invalidOf = (ref: string) => clone(envelopes.invalidRecipient(ref));
const outageOf = (ref: string) => clone(envelopes.outage(ref, inMs(60_000)));
const successOf = (ref: string) => clone(envelopes.success(ref));
const badCode = fc.oneof(
  fc.constantFrom(
    'outcome_unknown',
    'Outcome_Unknown',
    '1OUTCOME',
    'OUTCOME__UNKNOWN',
    'OUTCOME_',
    '_OUTCOME',
    'OUTCOME UNKNOWN',
    'OUTCOME-UNKNOWN',
    '',
  ),
  fc.stringMatching(/^[a-z][a-z_]{0,20}$/),
);
const notIso = fc.constantFrom(
  '30s',
  'tomorrow',
  '2026-12-02',
  '2026-12-02T10:00:00',
  '2026-13-02T10:00:00Z',
  '1764669600000',
  '2026-12-02 10:00:00Z',
  '',
);
const notInList = fc.stringMatching(/^[a-z_]{1,16}$/);

const envelopeRules: fc.Arbitrary<Case> = fc.oneof(
  badCode.chain((code) => envelopeRule(`code=${code}`, (ref) => ({ ...unknownOf(ref), code }), 'code')),
  fc
    .integer({ min: 65, max: 300 })
    .chain((n) => envelopeRule(`code of ${n} chars`, (ref) => ({ ...unknownOf(ref), code: 'C'.repeat(n) }), 'code')),
  notInList
    .filter((v) => !['validation', 'authorization', 'conflict', 'dependency', 'internal'].includes(v))
    .chain((category) => envelopeRule(`category=${category}`, (ref) => ({ ...unknownOf(ref), category }), 'category')),
  notInList
    .filter((v) => !['not_committed', 'committed', 'unknown'].includes(v))
    .chain((state) =>
      envelopeRule(`commit_state=${state}`, (ref) => ({ ...unknownOf(ref), commit_state: state }), 'commit_state'),
    ),
  notInList
    .filter((v) => !['never', 'after_delay', 'after_input_fix'].includes(v))
    .chain((directive) =>
      envelopeRule(
        `retry.directive=${directive}`,
        (ref) => ({ ...unknownOf(ref), retry: { directive, max_attempts_remaining: 0 } }),
        'retry.directive',
      ),
    ),
  notIso.chain((notBefore) =>
    envelopeRule(
      `retry.not_before=${notBefore}`,
      (ref) => ({ ...outageOf(ref), retry: { ...outageOf(ref).retry, not_before: notBefore } }),
      'retry.not_before',
    ),
  ),
  fc
    .constantFrom(-1, 1.5, '2', 1001, null)
    .chain((remaining) =>
      envelopeRule(
        `max_attempts_remaining=${remaining}`,
        (ref) => ({ ...invalidOf(ref), retry: { ...invalidOf(ref).retry, max_attempts_remaining: remaining } }),
        'retry.max_attempts_remaining',
      ),
    ),
  notInList
    .filter((v) => !['correct_input', 'wait_and_retry', 'verify_operation', 'request_approval', 'escalate'].includes(v))
    .chain((action) =>
      envelopeRule(`next_action=${action}`, (ref) => ({ ...invalidOf(ref), next_action: action }), 'next_action'),
    ),
  envelopeRule('operation_ref of another operation', () => unknownOf('run_other/step_1'), 'operation_ref'),
  envelopeRule('success for another operation', () => successOf('run_other/step_1'), 'operation_ref'),
  fc
    .constantFrom('password', 'stack', 'raw_response', 'token', 'sql')
    .chain((key) =>
      envelopeRule(
        `safe_details.${key} (not allowlisted)`,
        (ref) => ({ ...invalidOf(ref), safe_details: { [key]: 'x' } }),
        `safe_details.${key}`,
      ),
    ),
  fc
    .constantFrom<Json>({ nested: 1 }, [1, 2], null)
    .chain((value) =>
      envelopeRule(
        `safe_details.field=${JSON.stringify(value)}`,
        (ref) => ({ ...invalidOf(ref), safe_details: { field: value } }),
        'safe_details.field',
      ),
    ),
  fc
    .constantFrom<Json>('x', 3, [], null)
    .chain((value) =>
      envelopeRule(
        `safe_details=${JSON.stringify(value)}`,
        (ref) => ({ ...invalidOf(ref), safe_details: value }),
        'safe_details',
      ),
    ),
  fc
    .constantFrom<Json>(1, true, null, {})
    .chain((value) =>
      envelopeRule(
        `agent_message=${JSON.stringify(value)}`,
        (ref) => ({ ...invalidOf(ref), agent_message: value }),
        'agent_message',
      ),
    ),
  // Consistency rules.
  fc
    .constantFrom('after_delay', 'after_input_fix')
    .chain((directive) =>
      envelopeRule(
        `unknown write with directive ${directive}`,
        (ref) => ({ ...unknownOf(ref), retry: { directive, max_attempts_remaining: 0 } }),
        'retry.directive',
      ),
    ),
  fc
    .constantFrom('escalate', 'request_approval', 'correct_input', 'wait_and_retry')
    .chain((action) =>
      envelopeRule(
        `unknown write with next_action ${action}`,
        (ref) => ({ ...unknownOf(ref), next_action: action }),
        'next_action',
      ),
    ),
  fc
    .constantFrom('never', 'after_input_fix')
    .chain((directive) =>
      envelopeRule(
        `wait_and_retry with ${directive}`,
        (ref) => ({ ...outageOf(ref), retry: { ...outageOf(ref).retry, directive } }),
        'retry.directive',
      ),
    ),
  envelopeRule(
    'wait_and_retry without not_before',
    (ref) => ({ ...outageOf(ref), retry: { directive: 'after_delay', max_attempts_remaining: 2 } }),
    'retry.not_before',
  ),
  envelopeRule(
    'correct_input with unknown',
    (ref) => ({ ...invalidOf(ref), commit_state: 'unknown', retry: { directive: 'never', max_attempts_remaining: 0 } }),
    ['commit_state', 'next_action'],
  ),
  fc
    .constantFrom('never', 'after_delay')
    .chain((directive) =>
      envelopeRule(
        `correct_input with ${directive}`,
        (ref) => ({ ...invalidOf(ref), retry: { ...invalidOf(ref).retry, directive, not_before: inMs(1000) } }),
        'retry.directive',
      ),
    ),
  envelopeRule('ok:false with committed', (ref) => ({ ...invalidOf(ref), commit_state: 'committed' }), 'commit_state'),
  fc
    .constantFrom('not_committed', 'unknown', undefined)
    .chain((state) =>
      envelopeRule(
        `ok:true with commit_state ${state}`,
        (ref) => ({ ...successOf(ref), commit_state: state }),
        'commit_state',
      ),
    ),
  fc
    .constantFrom<Json>('yesterday', 5, null)
    .chain((checked) =>
      envelopeRule(
        `ok:true verification.checked_at=${checked}`,
        (ref) => ({ ...successOf(ref), verification: { checked_at: checked } }),
        'verification.checked_at',
      ),
    ),
  fc
    .constantFrom<Json>('true', 1, null, 'false')
    .chain((okValue) =>
      envelopeRule(`ok=${JSON.stringify(okValue)}`, (ref) => ({ ...unknownOf(ref), ok: okValue }), 'ok'),
    ),
);

const badValues: fc.Arbitrary<Case> = fc.oneof(
  fc
    .tuple(targetArb(ALL_TARGETS), fc.constantFrom(0, -1, 1001, 1.5, 1e9))
    .map(([t, attempt]) =>
      jsonCase(
        'bad-value',
        `attempt=${attempt}`,
        t,
        { events: [{ event_id: randomUUID(), type: 'AttemptDispatched', data: { attempt, input_hash: 'h1' } }] },
        BAD_REQUEST('events[0].data.attempt'),
      ),
    ),
  fc
    .tuple(
      targetArb(ALL_TARGETS),
      fc.constantFrom('TransitionRecorded', 'DispatchRefused', 'stepplanned', 'StepPlanned ', ''),
    )
    .chain(([t, type]) =>
      validBody('StepPlanned', REFS[t]).map((body) => {
        const copy = clone(body);
        copy.events[0].type = type;
        return jsonCase('bad-value', `type=${JSON.stringify(type)}`, t, copy, BAD_REQUEST('events[0].type'));
      }),
    ),
  fc
    .tuple(
      targetArb(ALL_TARGETS),
      fc.constantFrom<[FactType, string, Json]>(
        ['StepPlanned', 'side_effect', 'delete'],
        ['StepPlanned', 'run_id', 'run 81'],
        ['StepPlanned', 'run_id', ''],
        ['StepPlanned', 'tool', 'tööl'],
        ['StepPlanned', 'tool', 'a\tb'],
        ['StepPlanned', 'input_hash', ''],
        ['AttemptDispatched', 'input_hash', 'has space'],
        ['VerificationRecorded', 'outcome', 'maybe'],
        ['VerificationRecorded', 'checked_at', 'yesterday'],
        ['VerificationRecorded', 'checked_at', '2026-13-45T00:00:00Z'],
        ['VerificationRecorded', 'checked_at', '2026-12-02 10:00:00Z'],
        ['VerificationRecorded', 'evidence_ref', ''],
        ['ApprovalRecorded', 'decision', 'maybe'],
        ['ApprovalRecorded', 'approver', ''],
      ),
    )
    .chain(([t, [type, key, value]]) =>
      validBody(type, REFS[t]).map((body) => {
        const copy = clone(body);
        copy.events[0].data[key] = value;
        return jsonCase(
          'bad-value',
          `${type}.${key}=${JSON.stringify(value)}`,
          t,
          copy,
          BAD_REQUEST(`events[0].data.${key}`),
        );
      }),
    ),
  fc
    .tuple(
      targetArb(ALL_TARGETS),
      fc.constantFrom<[string, number]>(
        ['max_attempts', 0],
        ['max_attempts', 101],
        ['consistency_window_ms', -1],
        ['consistency_window_ms', 86_400_001],
        ['max_consecutive_dependency_failures', 0],
        ['dispatch_timeout_ms', 999],
        ['dispatch_timeout_ms', 86_400_001],
      ),
    )
    .chain(([t, [key, value]]) =>
      validBody('StepPlanned', REFS[t]).map((body) => {
        const copy = clone(body);
        copy.events[0].data.policy[key] = value;
        return jsonCase('bad-value', `policy.${key}=${value}`, t, copy, BAD_REQUEST(`events[0].data.policy.${key}`));
      }),
    ),
  fc
    .tuple(targetArb(ALL_TARGETS), fc.constantFrom(-2, -100))
    .chain(([t, rev]) =>
      validBody('AttemptDispatched', REFS[t]).map((body) =>
        jsonCase(
          'bad-value',
          `expected_revision=${rev}`,
          t,
          { ...body, expected_revision: rev },
          BAD_REQUEST('expected_revision'),
        ),
      ),
    ),
  targetArb(ALL_TARGETS).map((t) => jsonCase('bad-value', 'events=[]', t, { events: [] }, BAD_REQUEST('events'))),
  targetArb(ALL_TARGETS).map((t) =>
    jsonCase(
      'bad-value',
      '101 events (over LEDGER_MAX_EVENTS_PER_SUBMIT)',
      t,
      {
        events: Array.from({ length: 101 }, (_, i) => ({
          event_id: randomUUID(),
          type: 'AttemptDispatched',
          data: { attempt: i + 1, input_hash: 'h' },
        })),
      },
      BAD_REQUEST('events'),
    ),
  ),
  // A valid fact then an invalid one: the batch is refused whole, the valid part is not stored.
  fc
    .tuple(fc.constantFrom<Target>('planned', 'dispatched'), fc.constantFrom('x', 'OUTCOME unknown'))
    .map(([t, code]) => ({
      ...jsonCase(
        'bad-value',
        `valid fact then an invalid envelope`,
        t,
        {
          events: [
            {
              event_id: randomUUID(),
              type: t === 'planned' ? 'AttemptDispatched' : 'VerificationRecorded',
              data:
                t === 'planned'
                  ? { attempt: 1, input_hash: 'h' }
                  : { outcome: 'found_committed', checked_at: new Date().toISOString() },
            },
            {
              event_id: randomUUID(),
              type: 'EnvelopeRecorded',
              data: { attempt: 1, envelope: { ...unknownOf(REFS[t]), code } },
            },
          ],
        },
        { status: [422], code: ['ENVELOPE_INVALID'], field: ['events[1].data.envelope.code'] },
      ),
    })),
);

/** JSON text with a key no JSON.stringify of a plain object would write: inserted by a marker. */
function withKey(body: Json, at: (copy: Json) => Json, key: string, value: string): string {
  const copy = clone(body);
  at(copy).__MARK__ = 0;
  return JSON.stringify(copy).replace('"__MARK__":0', `${JSON.stringify(key)}:${value}`);
}
const LEVELS: Array<{
  name: string;
  type: FactType;
  at: (b: Json) => Json;
  field: (key: string) => string;
  envelope?: boolean;
}> = [
  { name: 'body', type: 'AttemptDispatched', at: (b) => b, field: (k) => k },
  { name: 'event', type: 'AttemptDispatched', at: (b) => b.events[0], field: (k) => `events[0].${k}` },
  { name: 'data', type: 'AttemptDispatched', at: (b) => b.events[0].data, field: (k) => `events[0].data.${k}` },
  {
    name: 'policy',
    type: 'StepPlanned',
    at: (b) => b.events[0].data.policy,
    field: (k) => `events[0].data.policy.${k}`,
  },
  {
    name: 'envelope',
    type: 'EnvelopeRecorded',
    at: (b) => b.events[0].data.envelope,
    field: (k) => `events[0].data.envelope.${k}`,
    envelope: true,
  },
  {
    name: 'verification result',
    type: 'VerificationRecorded',
    at: (b) => (b.events[0].data.result = {}),
    field: () => 'body',
  },
];

const prototypeKeys: fc.Arbitrary<Case> = fc.oneof(
  // Prototype pollution through JSON: refused at the parser, before any code sees the body.
  fc
    .tuple(
      targetArb(ALL_TARGETS),
      fc.constantFrom(...LEVELS),
      fc.constantFrom('{"polluted":true}', '{"__proto__":{"admin":true}}', '[]', '1'),
    )
    .chain(([t, level, value]) =>
      validBody(level.type, REFS[t]).map((body) => ({
        category: 'prototype',
        label: `__proto__:${value} in ${level.name} @${t}`,
        path: eventsPath(REFS[t]),
        body: withKey(body, level.at, '__proto__', value),
        expect: BAD_REQUEST('body'),
      })),
    ),
  fc.tuple(targetArb(ALL_TARGETS), fc.constantFrom(...LEVELS)).chain(([t, level]) =>
    validBody(level.type, REFS[t]).map((body) => ({
      category: 'prototype',
      label: `constructor.prototype in ${level.name} @${t}`,
      path: eventsPath(REFS[t]),
      body: withKey(body, level.at, 'constructor', '{"prototype":{"polluted":true}}'),
      expect: BAD_REQUEST('body'),
    })),
  ),
  // Keys named like Object.prototype members are unknown fields like any other.
  fc
    .tuple(
      targetArb(ALL_TARGETS),
      fc.constantFrom(...LEVELS.slice(0, 5)),
      fc.constantFrom('constructor', 'toString', 'hasOwnProperty', 'valueOf', 'isPrototypeOf', '__defineGetter__'),
    )
    .chain(([t, level, key]) =>
      validBody(level.type, REFS[t]).map((body) => ({
        category: 'prototype',
        label: `${key}:"x" in ${level.name} @${t}`,
        path: eventsPath(REFS[t]),
        body: withKey(body, level.at, key, '"x"'),
        // `constructor` is refused anywhere by the body inspection (400) before the envelope is read.
        expect:
          level.envelope && key !== 'constructor'
            ? { status: [422], code: ['ENVELOPE_INVALID'], field: [level.field(key)] }
            : BAD_REQUEST(level.field(key)),
      })),
    ),
);

// Bodies that would be accepted as application/json: only the content type is wrong.
const acceptableBody = (t: Target): Json =>
  t === 'dispatched'
    ? envelopeBody(envelopes.success(REFS.dispatched))
    : {
        events: [
          {
            event_id: randomUUID(),
            type: 'StepPlanned',
            data: { run_id: 'run_m', tool: 'create_invoice', side_effect: 'write', input_hash: 'sha256:input-1' },
          },
        ],
      };

const contentTypes: fc.Arbitrary<Case> = fc
  .tuple(
    fc.constantFrom<Target>('unplanned', 'dispatched'),
    fc.constantFrom<string | null>(
      'text/plain',
      'text/plain; charset=utf-8',
      'application/xml',
      'text/html',
      'application/octet-stream',
      'multipart/form-data; boundary=x',
      'application/jsonx',
      'application/json-patch+json',
      'image/png',
      'application/x-www-form-urlencoded',
      null,
    ),
  )
  .map(([t, contentType]) => ({
    category: 'content-type',
    label: `${contentType ?? 'no content-type'} @${t}`,
    path: eventsPath(REFS[t]),
    body: JSON.stringify(acceptableBody(t)),
    contentType,
    expect: { status: [400, 415], code: ['BAD_REQUEST', 'UNSUPPORTED_MEDIA_TYPE'] },
  }));

// A valid plan sent to a ref that is not one: if the ref were accepted, the plan would be stored.
const planBody = () => JSON.stringify(acceptableBody('unplanned'));
const badRefs: fc.Arbitrary<Case> = fc.oneof(
  fc.tuple(ident, fc.constantFrom('%00', '%0A', '%0D', '%1F', '%7F', '%09'), ident).map(([a, c, b]) => ({
    category: 'bad-ref',
    label: `control ${c}`,
    path: `/v1/operations/${a}${c}${b}/events`,
    body: planBody(),
    expect: BAD_REQUEST('operation_ref'),
  })),
  fc.integer({ min: 1, max: 5 }).map((n) => ({
    category: 'bad-ref',
    label: `${n} spaces`,
    path: `/v1/operations/${'%20'.repeat(n)}/events`,
    body: planBody(),
    expect: BAD_REQUEST('operation_ref'),
  })),
  fc.integer({ min: 201, max: 400 }).map((n) => ({
    category: 'bad-ref',
    label: `${n} characters`,
    path: `/v1/operations/${'r'.repeat(n)}/events`,
    body: planBody(),
    expect: BAD_REQUEST('operation_ref'),
  })),
  fc.tuple(ident, fc.constantFrom('%', '%2', '%ZZ', '%E0%A4%A', '%C3%28', '%FF')).map(([a, bad]) => ({
    category: 'bad-ref',
    label: `bad percent-encoding ${bad}`,
    path: `/v1/operations/${a}${bad}/events`,
    body: planBody(),
    expect: BAD_REQUEST(['operation_ref', 'path']),
  })),
);

// Reads with a bad ref or query: no body, but the same typed answers.
const badReads: fc.Arbitrary<Case> = fc.oneof(
  fc.constantFrom('-1', '1.5', 'abc', '1e3', '0x10', '99999999999999999999').map((rev) => ({
    category: 'bad-read',
    label: `as_of_revision=${rev}`,
    method: 'GET' as const,
    path: `${eventsPath(REFS.planned)}?as_of_revision=${rev}`,
    expect: BAD_REQUEST('as_of_revision'),
  })),
  fc.constantFrom('%00', '%20', '%0A').map((c) => ({
    category: 'bad-read',
    label: `GET ref ${c}`,
    method: 'GET' as const,
    path: `/v1/operations/${c}`,
    expect: BAD_REQUEST('operation_ref'),
  })),
);

// Bodies over the default limit (256 KiB): a valid verification that would be recorded otherwise.
const DEFAULT_LIMIT = 256 * 1024;
const overDefaultLimit: fc.Arbitrary<Case> = fc
  .tuple(
    fc.integer({ min: DEFAULT_LIMIT + 1, max: 700_000 }),
    fc.constantFrom<'content-length' | 'chunked'>('content-length', 'chunked'),
  )
  .map(([size, framing]) => ({
    category: 'size',
    label: `${size} bytes, ${framing}`,
    overLimit: { limit: DEFAULT_LIMIT, framing },
    path: eventsPath(REFS.dispatched),
    body: JSON.stringify({
      events: [
        {
          event_id: randomUUID(),
          type: 'VerificationRecorded',
          data: {
            outcome: 'found_committed',
            checked_at: new Date().toISOString(),
            result: { blob: 'b'.repeat(size) },
          },
        },
      ],
    }),
    expect: { status: [413], code: ['PAYLOAD_TOO_LARGE'] },
  }));

const CATEGORIES: Array<[fc.Arbitrary<Case>, number]> = [
  [wrongTypes, 45],
  [missingFields, 35],
  [unknownFields, 35],
  [brokenJson, 30],
  [hugeStrings, 25],
  [badUuids, 25],
  [envelopeRules, 70],
  [badValues, 30],
  [prototypeKeys, 30],
  [contentTypes, 12],
  [badRefs, 16],
  [badReads, 8],
  [overDefaultLimit, 4],
];

function generateCases(): Case[] {
  return CATEGORIES.flatMap(([arbitrary, count], index) =>
    fc.sample(arbitrary, { seed: SEED + index, numRuns: count }),
  );
}

// ---- sending and judging ----------------------------------------------------------------------------

function toAnswer(status: number, contentType: string, text: string): Answer {
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status, contentType, text, body };
}

async function send(baseUrl: string, c: Case): Promise<Answer> {
  if (c.overLimit) return sendOverLimit(baseUrl, c);
  const headers: Record<string, string> = {};
  if (c.contentType !== null) headers['content-type'] = c.contentType ?? 'application/json';
  const method = c.method ?? 'POST';
  const body = method === 'POST' && c.body !== undefined ? new TextEncoder().encode(c.body) : undefined;
  const response = await fetch(`${baseUrl}${c.path}`, { method, headers, body });
  return toAnswer(response.status, response.headers.get('content-type') ?? '', await response.text());
}

/**
 * An over-limit body, sent over a raw socket the way a careful client does: it sends the headers
 * (content-length framing) or the first limit+1 bytes (chunked framing), then waits for the answer
 * before sending more. A server that enforces the limit answers from what it has; one that does not
 * waits, gets the rest after the wait, and answers whatever it decides (which the test then judges).
 * Sending everything at once would race the server's close of the connection (EPIPE, lost answer).
 */
function sendOverLimit(baseUrl: string, c: Case): Promise<Answer> {
  const { port, hostname, host } = new URL(baseUrl);
  const { limit, framing } = c.overLimit!;
  const body = Buffer.from(c.body ?? '');
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const received: Buffer[] = [];
    let answered = false;
    socket.on('data', (chunk) => {
      answered = true;
      received.push(chunk);
    });
    socket.on('error', (error) => (answered ? undefined : reject(error)));
    socket.on('close', () => {
      clearTimeout(rest);
      const raw = Buffer.concat(received).toString('latin1');
      const split = raw.indexOf('\r\n\r\n');
      if (split < 0) return reject(new Error(`no HTTP answer for ${c.label}: ${JSON.stringify(raw.slice(0, 200))}`));
      const [statusLine, ...headerLines] = raw.slice(0, split).split('\r\n');
      const headers = new Map(
        headerLines.map((line) => [
          line.slice(0, line.indexOf(':')).toLowerCase(),
          line.slice(line.indexOf(':') + 1).trim(),
        ]),
      );
      let text = Buffer.from(raw.slice(split + 4), 'latin1').toString('utf8');
      if (headers.get('transfer-encoding') === 'chunked')
        text = text.replace(/(?:^|\r\n)[0-9a-f]+\r\n/gi, '').replace(/\r\n$/, '');
      resolve(toAnswer(Number(statusLine.split(' ')[1]), headers.get('content-type') ?? '', text));
    });
    const framingHeader = framing === 'chunked' ? 'transfer-encoding: chunked' : `content-length: ${body.length}`;
    socket.write(
      `POST ${c.path} HTTP/1.1\r\nhost: ${host}\r\ncontent-type: application/json\r\nconnection: close\r\n${framingHeader}\r\n\r\n`,
    );
    const chunk = (bytes: Buffer) =>
      socket.write(`${bytes.length.toString(16)}\r\n${bytes.toString('latin1')}\r\n`, 'latin1');
    const first = framing === 'chunked' ? body.subarray(0, limit + 1) : Buffer.alloc(0);
    for (let at = 0; at < first.length; at += 1024) chunk(first.subarray(at, at + 1024));
    // Not an assertion: how long to wait for an early answer before sending the rest of the body.
    const rest = setTimeout(() => {
      if (answered || socket.destroyed) return;
      if (framing === 'chunked') {
        chunk(body.subarray(limit + 1));
        socket.write('0\r\n\r\n');
      } else socket.write(body);
    }, 2000);
  });
}

/**
 * Sends the cases a few at a time. Over-limit bodies go one by one, after the rest: the server
 * answers 413 before reading them and closes the connection, and fetch's pool can race that close
 * with another request on the same socket (EPIPE on the client, not an answer of the server).
 */
async function sendAll(baseUrl: string, cases: Case[], concurrency = 6): Promise<Answer[]> {
  const answers: Answer[] = new Array(cases.length);
  const indexes = cases.map((_, index) => index);
  const pooled = indexes.filter((index) => cases[index].category !== 'size');
  let next = 0;
  const worker = async () => {
    while (next < pooled.length) {
      const index = pooled[next++];
      answers[index] = await send(baseUrl, cases[index]);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  for (const index of indexes.filter((i) => cases[i].category === 'size'))
    answers[index] = await send(baseUrl, cases[index]);
  return answers;
}

const show = (c: Case, a: Answer) =>
  `${c.category}: ${c.label} -> ${a.status} ${a.body?.code ?? a.contentType} ${a.body?.field ?? ''}`.trim();
const REGISTRY_CODES = Object.keys(ERROR_REGISTRY);
const isProblem = (a: Answer) =>
  a.contentType.startsWith(PROBLEM) && REGISTRY_CODES.includes(a.body?.code) && a.body?.status === a.status;

function violations(cases: Case[], answers: Answer[], broken: (c: Case, a: Answer) => boolean): string[] {
  return cases.flatMap((c, i) => (broken(c, answers[i]) ? [show(c, answers[i])] : []));
}

describe('malformed requests get typed 4xx answers and store nothing', () => {
  let ledger: LedgerProcess;
  let cases: Case[];
  let answers: Answer[];
  let before: string;
  let after: string;

  beforeAll(async () => {
    ledger = await startLedger({ env: { LEDGER_RATE_LIMIT_PER_MINUTE: '10000000' } });
    const api = ledgerAt(ledger.baseUrl);
    ok(await operation(api, REFS.planned).plan());
    ok(await operation(api, REFS.readPlanned).plan({ side_effect: 'read' }));
    ok(await operation(api, REFS.dispatched).plan());
    ok(await operation(api, REFS.dispatched).dispatch(1));
    cases = generateCases();
    before = dumpEvents(ledger.dataDir);
    answers = await sendAll(ledger.baseUrl, cases);
    after = dumpEvents(ledger.dataDir);
  });

  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  test('at least 300 malformed bodies, from every category, were sent', () => {
    const bodies = cases.filter((c) => (c.method ?? 'POST') === 'POST');
    expect(bodies.length).toBeGreaterThanOrEqual(300);
    expect(new Set(bodies.map((c) => c.body)).size).toBeGreaterThanOrEqual(300);
    expect(new Set(cases.map((c) => c.category)).size).toBe(CATEGORIES.length);
  });

  test('no answer is a 5xx; every answer is a 4xx', () => {
    expect(violations(cases, answers, (_c, a) => a.status < 400 || a.status >= 500)).toEqual([]);
  });

  test('every answer is application/problem+json with a code from ERROR_REGISTRY and no internals', () => {
    expect(violations(cases, answers, (_c, a) => !isProblem(a))).toEqual([]);
    expect(violations(cases, answers, (_c, a) => /node_modules|\.js:\d+|\bat [A-Z]\w+\.|FST_ERR/.test(a.text))).toEqual(
      [],
    );
  });

  test('every 400 and 422 names the field at fault', () => {
    expect(
      violations(
        cases,
        answers,
        (_c, a) =>
          (a.status === 400 || a.status === 422) && !(typeof a.body?.field === 'string' && a.body.field.length > 0),
      ),
    ).toEqual([]);
  });

  test('each case gets the status, code and field its defect calls for', () => {
    expect(
      violations(cases, answers, (c, a) => {
        const { status, code, field } = c.expect;
        if (!status.includes(a.status)) return true;
        if (code && !code.includes(a.body?.code)) return true;
        return field !== undefined && !field.includes(a.body?.field);
      }),
    ).toEqual([]);
  });

  test('the events table is byte-for-byte unchanged', () => {
    // On failure, show which cases stored something: the rows that appeared, by stream and type.
    const added = (JSON.parse(after) as Array<{ stream: string; type: string; position: number }>).slice(
      (JSON.parse(before) as unknown[]).length,
    );
    expect(added.map((row) => `${row.stream} ${row.type}`)).toEqual([]);
    expect(after).toBe(before);
  });
});

describe('bodies over a configured limit (LEDGER_BODY_LIMIT_BYTES=2048)', () => {
  test('413 PAYLOAD_TOO_LARGE whatever the size or framing, and nothing is stored; a body under the limit is accepted', async () => {
    const ledger = await startLedger({ env: { LEDGER_BODY_LIMIT_BYTES: '2048' } });
    try {
      const api = ledgerAt(ledger.baseUrl);
      const op = operation(api, REFS.dispatched);
      ok(await op.plan());
      ok(await op.dispatch(1));
      const verification = (size: number) =>
        JSON.stringify({
          events: [
            {
              event_id: randomUUID(),
              type: 'VerificationRecorded',
              data: {
                outcome: 'found_committed',
                checked_at: new Date().toISOString(),
                result: { blob: 'b'.repeat(size) },
              },
            },
          ],
        });
      const sizes = fc.sample(
        fc.tuple(
          fc.integer({ min: 2049, max: 200_000 }),
          fc.constantFrom<'content-length' | 'chunked'>('content-length', 'chunked'),
        ),
        { seed: SEED, numRuns: 12 },
      );
      // Both framings: declared by content-length (refusable from the headers) and chunked (the
      // limit must hold while the body streams in, with no length announced).
      const cases: Case[] = [...sizes, [3000, 'chunked'] as const, [2100, 'content-length'] as const].map(
        ([size, framing]) => ({
          category: 'size',
          label: `${size} bytes, ${framing}`,
          path: eventsPath(REFS.dispatched),
          body: verification(size),
          overLimit: { limit: 2048, framing },
          expect: { status: [413] },
        }),
      );
      const before = dumpEvents(ledger.dataDir);
      const answers = await sendAll(ledger.baseUrl, cases);
      expect(
        violations(
          cases,
          answers,
          (_c, a) => a.status !== 413 || a.body?.code !== 'PAYLOAD_TOO_LARGE' || !isProblem(a),
        ),
      ).toEqual([]);
      expect(dumpEvents(ledger.dataDir)).toBe(before);

      // The same fact, small enough, is recorded: the 413s above were the limit, not the fact.
      expect(ok(await op.verify('found_committed', { result: { blob: 'small' } })).state.status).toBe('succeeded');
    } finally {
      await ledger.stop();
      ledger.cleanup();
    }
  });
});
