import Ajv from 'ajv';
import { isUUID } from 'class-validator';
import fc from 'fast-check';
import { isRfc3339Instant, LedgerProblem } from '@recovery-ledger/core';
import { readSubmitBody } from '../../../src/http/submit-body.reader';
import { factSchemas, type Schema } from '../../../src/openapi/fact-schemas';
import { anyBody, MAX_EVENTS, mutate, withKey } from '../../support/submit-body-arbitraries';

/**
 * The submit body is read against its one definition (packages/core/src/facts): the reader that
 * names the first violation, and the schemas the OpenAPI document publishes, must accept the same
 * bodies. Ajv, compiled from the published document, is the independent reading; the 400s' words
 * and fields are pinned by the cases below and by the e2e suites of the route.
 */

const FROM = '#/components/schemas/';

/** The published schemas as one JSON Schema: references resolved locally, the envelope only an object. */
function publishedSubmitBody(): Schema {
  const runtime = (schema: unknown): unknown => {
    if (Array.isArray(schema)) return schema.map(runtime);
    if (!schema || typeof schema !== 'object') return schema;
    const out: Schema = {};
    for (const [key, value] of Object.entries(schema as Schema)) {
      // Ajv reads the discriminator from the oneOf branches themselves and refuses a mapping.
      if (key === 'discriminator') out[key] = { propertyName: (value as { propertyName: string }).propertyName };
      else if (key === '$ref' && typeof value === 'string' && value.startsWith(FROM))
        out[key] = `#/$defs/${value.slice(FROM.length)}`;
      else out[key] = runtime(value);
    }
    return out;
  };
  const defs = runtime(factSchemas()) as Record<string, { properties: Schema }>;
  // Checked in depth against its step, after the body is read (422 ENVELOPE_INVALID).
  defs.EnvelopeRecordedData.properties.envelope = { type: 'object' };
  return { $ref: '#/$defs/SubmitEventsDto', $defs: defs };
}

const ajv = new Ajv({ strict: true, discriminator: true, allErrors: false });
ajv.addFormat('uuid', { type: 'string', validate: (value: string) => isUUID(value, 'all') });
ajv.addFormat('date-time', { type: 'string', validate: (value: string) => isRfc3339Instant(value) });
const published = ajv.compile(publishedSubmitBody());

type Answer = { ok: true; value: unknown } | { ok: false; code: string; detail: string; extras: unknown };

function answer(body: unknown, maxEvents = MAX_EVENTS): Answer {
  try {
    return { ok: true, value: readSubmitBody(structuredClone(body), maxEvents) };
  } catch (error) {
    if (!(error instanceof LedgerProblem)) throw error;
    return { ok: false, code: error.code, detail: error.detail, extras: error.extras };
  }
}

const refusedWith = (detail: string, field: string): Answer => ({
  ok: false,
  code: 'BAD_REQUEST',
  detail,
  extras: { field },
});

const BASE = {
  events: [
    {
      event_id: '5a7b2d3f-1e8c-4b63-8b54-2d9f3c8e0a21',
      type: 'ApprovalRecorded',
      data: { decision: 'granted', approver: 'alice' },
    },
  ],
};
const VS = '\uFE0F';

describe('the submit body, read against the fact schemas', () => {
  it('accepts exactly what the published schemas accept (but lengths and the checks a schema cannot say)', () => {
    let accepted = 0;
    let refused = 0;
    fc.assert(
      fc.property(anyBody, (body) => {
        const read = answer(body);
        const valid = published(structuredClone(body)) === true;
        if (read.ok) accepted += 1;
        else refused += 1;
        // A character and its variation selector count as one against a bound (docs/contract.md §9);
        // JSON Schema counts two.
        if (/[\uFE0E\uFE0F]/.test(JSON.stringify(body) ?? '')) return;
        if (valid && !read.ok) {
          // What the schema cannot say: events per submit, one id twice, keys named like
          // Object.prototype members (checked before the schema).
          expect(read.detail).toMatch(
            /^(at most \d+ events per submit|an event_id appears twice in one submit|.* should not exist)$/,
          );
        } else {
          expect({ body, read: read.ok }).toEqual({ body, read: valid });
        }
      }),
      { numRuns: 3000 },
    );
    expect(accepted).toBeGreaterThan(150);
    expect(refused).toBeGreaterThan(750);
  });

  it.each(
    (
      [
        [
          ['events', '0', 'event_id'],
          'urn:uuid:5a7b2d3f-1e8c-4b63-9a43-1c8e2b7d9f10',
          'events[0].event_id must be a UUID',
        ],
        [['events', '0', 'event_id'], '', 'events[0].event_id must not be empty: a UUID (any version but 8)'],
        [['events', '0', 'event_id'], 'inv-42', 'events[0].event_id must be a UUID'],
        [['events', '0', 'event_id'], '5a7b2d3f-1e8c-4b63-cb54-2d9f3c8e0a21', 'events[0].event_id must be a UUID'],
        [
          ['events', '0', 'event_id'],
          '5a7b2d3f-1e8c-8b63-8b54-2d9f3c8e0a21',
          'events[0].event_id must not be a version 8 UUID: those are the ids the ledger derives',
        ],
        [
          ['events', '0', 'type'],
          'StepDone',
          'events[0].type must be one of the following values: StepPlanned, AttemptDispatched, EnvelopeRecorded, VerificationRecorded, ApprovalRecorded, OutcomeVerifiedManually, StepCancelled, StepReopened, EscalationAcknowledged',
        ],
        [['events', '0', 'data'], [], 'events[0].data must be an object'],
        [
          ['events', '0', 'data', 'approver'],
          'a'.repeat(201),
          'events[0].data.approver must be shorter than or equal to 200 characters',
        ],
        [
          ['events', '0', 'data', 'approver'],
          '',
          'events[0].data.approver must be longer than or equal to 1 characters',
        ],
        [
          ['events', '0', 'data', 'approver'],
          7,
          'events[0].data.approver must be shorter than or equal to 200 characters',
        ],
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
        [
          ['events', '0', 'data', 'input_hash'],
          'a b',
          'events[0].data.input_hash must be ASCII letters, digits and _ . : / @ + = # ~ - (starting with a letter, digit or _)',
        ],
        [
          ['events', '0', 'data', 'input_hash'],
          null,
          'events[0].data.input_hash must be ASCII letters, digits and _ . : / @ + = # ~ - (starting with a letter, digit or _)',
        ],
        [['expected_revision'], 1.5, 'expected_revision must be an integer number'],
        [['expected_revision'], -2, 'expected_revision must not be less than -1'],
        [['expected_revision'], null, 'expected_revision must not be less than -1'],
        [['events'], 5, 'events must contain no more than 10000 elements'],
        [['events'], [], 'events must contain at least 1 elements'],
        [['events', '0'], 'x', 'events[0] must be an object'],
        // The client's own key is taken literally in the message, never as a pattern.
        [['('], 1, '( property ( should not exist'],
        [['events', '0', 'data', 'p.*'], 1, 'events[0].data.p.* property p.* should not exist'],
        [['events', '0', 'data', '12'], 1, 'events[0].data[12] property 12 should not exist'],
        // A key that begins the word "property" is named whole (it once read "p roperty p …").
        [['events', '0', 'data', 'p'], 1, 'events[0].data.p property p should not exist'],
        [['property'], 1, 'property property property should not exist'],
      ] as Array<[string[], unknown, string]>
    ).map(([path, value, detail]) => [detail, path, value] as const),
  )('answers: %s', (detail, path, value) => {
    const field = detail.slice(0, detail.indexOf(' '));
    expect(answer(mutate(BASE, path, 'set', value))).toEqual(refusedWith(detail, field));
  });

  it("reads a value's rules in their order: the pattern, the bounds, then the type", () => {
    const plan = (data: Record<string, unknown>) => ({
      events: [{ event_id: '5a7b2d3f-1e8c-4b63-8b54-2d9f3c8e0a21', type: 'StepPlanned', data }],
    });
    const base = { run_id: 'run_1', tool: 'tool', side_effect: 'write', input_hash: 'h' };
    const detail = (data: Record<string, unknown>) => (answer(plan(data)) as { detail: string }).detail;
    expect(detail({ ...base, run_id: 5 })).toBe(
      'events[0].data.run_id must be ASCII letters, digits and _ . : / @ + = # ~ - (starting with a letter, digit or _)',
    );
    expect(detail({ ...base, run_id: 'a'.repeat(201) })).toBe(
      'events[0].data.run_id must be shorter than or equal to 200 characters',
    );
    expect(detail({ ...base, policy: [] })).toBe('events[0].data.policy must be an object');
    expect(detail({ ...base, policy: { max_attempts: '0' } })).toBe(
      'events[0].data.policy.max_attempts must not be greater than 100',
    );
    expect(detail({ ...base, policy: { max_attempts: 0 } })).toBe(
      'events[0].data.policy.max_attempts must not be less than 1',
    );
    expect(detail({ ...base, policy: { max_attempts: 1.5 } })).toBe(
      'events[0].data.policy.max_attempts must be an integer number',
    );
    expect(detail({ side_effect: 'write', extra: 1 })).toBe('events[0].data.extra property extra should not exist');
    expect(detail({ tool: 'tool' })).toBe(
      'events[0].data.run_id must be ASCII letters, digits and _ . : / @ + = # ~ - (starting with a letter, digit or _)',
    );
    expect(answer({ events: [{}] })).toEqual(
      refusedWith(
        'events[0].event_id is missing: each event needs a UUID of its own (any version but 8)',
        'events[0].event_id',
      ),
    );
  });

  it('counts a character with its variation selector as one against a bound', () => {
    expect(answer(mutate(BASE, ['events', '0', 'data', 'approver'], 'set', `${'a'.repeat(199)}a${VS}`)).ok).toBe(true);
    expect(answer(mutate(BASE, ['events', '0', 'data', 'approver'], 'set', `${'a'.repeat(200)}a${VS}`))).toEqual(
      refusedWith('events[0].data.approver must be shorter than or equal to 200 characters', 'events[0].data.approver'),
    );
  });

  it('keeps the data exactly as sent: -0, 1e21, unicode and key order survive, the event_id is lower-cased', () => {
    const data = {
      run_id: 'run_1',
      tool: 'create_invoice',
      side_effect: 'write',
      input_hash: 'h',
      input: { z: -0, a: 1e21, s: '😀\u0301', nested: [{ b: 2 ** 53 }] },
    };
    const read = readSubmitBody(
      {
        expected_revision: -0,
        events: [{ event_id: '4F6A1C2E-0D7B-4A52-9A43-1C8E2B7D9F10', type: 'StepPlanned', data }],
      },
      MAX_EVENTS,
    );
    expect(Object.is(read.expected_revision, -0)).toBe(true);
    expect(read.events[0].event_id).toBe('4f6a1c2e-0d7b-4a52-9a43-1c8e2b7d9f10');
    expect(JSON.stringify(read.events[0].data)).toBe(JSON.stringify(data));
    expect(Object.is((read.events[0].data as { input: { z: number } }).input.z, -0)).toBe(true);
  });

  it('drops keys that could reach a prototype from the free-form parts, and refuses them elsewhere', () => {
    const envelope = withKey({ ok: true, value: withKey({ a: 1 }, '__proto__', { polluted: true }) }, 'constructor', 1);
    const body = {
      events: [
        { event_id: '5a7b2d3f-1e8c-4b63-8b54-2d9f3c8e0a21', type: 'EnvelopeRecorded', data: { attempt: 1, envelope } },
      ],
    };
    expect(answer(body)).toEqual({
      ok: true,
      value: { events: [{ ...body.events[0], data: { attempt: 1, envelope: { ok: true, value: { a: 1 } } } }] },
    });
    expect(answer(mutate(BASE, ['events', '0', 'data', '__proto__'], 'set', {}))).toEqual(
      refusedWith('events[0].data.__proto__ should not exist', 'events[0].data.__proto__'),
    );
  });

  it('holds the limits the schema cannot say: events per submit, and one id twice', () => {
    expect(answer({ events: [BASE.events[0], BASE.events[0]] })).toEqual(
      refusedWith('an event_id appears twice in one submit', 'events[1].event_id'),
    );
    expect(answer({ events: Array.from({ length: 4 }, () => BASE.events[0]) })).toEqual(
      refusedWith('at most 3 events per submit', 'events'),
    );
    const many = (count: number) => ({
      events: Array.from({ length: count }, (_, index) => ({
        ...BASE.events[0],
        event_id: `5a7b2d3f-1e8c-4b63-8b54-${String(index).padStart(12, '0')}`,
      })),
    });
    expect(answer(many(10_000), 20_000).ok).toBe(true);
    expect(answer(many(10_001), 20_000)).toEqual(
      refusedWith('events must contain no more than 10000 elements', 'events'),
    );
  });
});
