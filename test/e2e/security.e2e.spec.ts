/**
 * Security checks that need the built service as a process of its own, one describe block per
 * subject: the fuzzed API, the auth matrix over every route, long polls held open, approvals and
 * what the start-up log says of them, and local mode and the refusals to start (src/main.ts's own).
 * Each block keeps its own header, constants and hooks.
 */

import Database from 'better-sqlite3';
import fc from 'fast-check';
import { randomUUID, createHash } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';
import { join, resolve } from 'node:path';
import { ERROR_REGISTRY } from '@recovery-ledger/core';
import { approval, auth as approvalAuth, awaitingApproval, KEYS, keyOf } from '../support/approval-matrix';
import { opPath, fact, request } from '../support/http';
import { call as keyCall, plan as keyPlan, rawRows } from '../support/key-calls';
import { startLedger, type LedgerProcess, freePort, MAIN } from '../support/ledger-process';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { until } from '../support/until';

describe('the API fuzzed', () => {
  /**
   * Fuzzing over real HTTP: at least 10 000 generated requests per run — structured and
   * garbage bodies, paths, queries, methods, content types and credentials — against the built
   * service, from a fixed seed (LEDGER_FUZZ_SEED and LEDGER_FUZZ_RUNS override it; a failure names
   * the seed and the request's index, so `fc.sample` with the same seed rebuilds it).
   *
   * Every answer must be below 500; every 4xx must be problem+json with a registered code whose
   * status is the answer's; the edges (arrays nested where objects belong, numbers outside the safe
   * integer range, instants a calendar does not have or without a time zone) must be a 400 (or a 422
   * inside an envelope) naming the field; and the events table must be byte-for-byte what it was before.
   *
   * Why that last assertion is honest: every generated request is one that must change nothing,
   * by construction, whatever the generator happens to pick —
   * - broken bodies (a valid submit with at least one defect, or garbage) must be refused whole;
   * - well-formed facts are only ever sent where the decider refuses them without recording the
   *   refusal: to an operation that has succeeded, a verification, an approval, an envelope (no
   *   attempt in flight) or a plan with another definition (never a dispatch, whose refusal on a
   *   succeeded step is recorded as a prevented duplicate); and to operations never planned,
   *   anything but a plan (STEP_NOT_PLANNED);
   * - paths and credentials go anywhere except where an answer changes state (no admin POST);
   * and a POST that answers 2xx is a failure of its own. So any new row is a bug, not noise.
   */
  /** A client's event id: any UUID version but 8, which the ledger keeps for the ids it derives. */
  const clientUuid = fc.uuid({ version: [1, 2, 3, 4, 5, 6, 7] });

  const SEED = Number(process.env.LEDGER_FUZZ_SEED ?? 20261206);
  const RUNS = Number(process.env.LEDGER_FUZZ_RUNS ?? 10_000);
  const CONCURRENCY = 8;
  const BODY_LIMIT = 64 * 1024;
  const MAX_EVENTS = 5;

  const RUNTIME_KEY = 'fuzz-runtime-key-3d9a1f7c5e2b8046';
  const AUDITOR_KEY = 'fuzz-auditor-key-6b0e2c4a8d1f3957';
  const ADMIN_KEY = 'fuzz-admin-key-9c7e5a3b1d0f2468a';
  const KEYS = `${RUNTIME_KEY}:runtime:acme,${AUDITOR_KEY}:auditor:acme,${ADMIN_KEY}:admin:acme`;

  /** Succeeded before the fuzz starts; its definition uses names no generator produces. */
  const SUCCEEDED_REF = 'run_FIXTURE/succeeded';
  const FIXTURE_PLAN = {
    run_id: 'run_FIXTURE',
    tool: 'FIXTURE_TOOL',
    side_effect: 'write',
    input_hash: 'sha256:FIXTURE',
  };

  interface FuzzRequest {
    category: string;
    method: string;
    path: string;
    headers: Record<string, string>;
    body?: string | Buffer;
    /** For requests whose refusal is known exactly: the statuses allowed, and a field must be named. */
    expect?: { statuses: number[] };
  }

  // ---- generators ------------------------------------------------------------------------------------

  type Json = any;
  const ident = fc.stringMatching(/^[a-z][a-z0-9_]{0,20}$/);
  const instant = fc
    .date({ min: new Date('2020-01-01'), max: new Date('2030-01-01'), noInvalidDate: true })
    .map((date) => date.toISOString());
  const anyJson = fc.jsonValue({ maxDepth: 3 });
  const unplannedRef = fc.tuple(ident, ident).map(([run, step]) => `run_fz_${run}/${step}`);
  const auth = (key: string) => ({ authorization: `Bearer ${key}` });

  /** The envelope's operation_ref is filled in with the target's ref once that is chosen. */
  const envelope = fc.oneof(
    fc.record({
      ok: fc.constant(true),
      commit_state: fc.constant('committed'),
      result: anyJson,
      verification: fc.record({ checked_at: instant }),
    }),
    fc.record({
      ok: fc.constant(false),
      code: fc.stringMatching(/^[A-Z][A-Z_]{2,30}$/),
      category: fc.constantFrom('validation', 'authorization', 'conflict', 'dependency', 'internal'),
      commit_state: fc.constantFrom('not_committed', 'committed', 'unknown'),
      retry: fc.record(
        {
          directive: fc.constantFrom('never', 'after_delay', 'after_input_fix'),
          not_before: instant,
          max_attempts_remaining: fc.nat(5),
        },
        { requiredKeys: ['directive', 'max_attempts_remaining'] },
      ),
      next_action: fc.constantFrom(
        'correct_input',
        'wait_and_retry',
        'verify_operation',
        'request_approval',
        'escalate',
      ),
      safe_details: fc.dictionary(fc.constantFrom('field', 'limit', 'retry_after'), fc.oneof(ident, fc.nat())),
      agent_message: fc.string({ maxLength: 80 }),
      user_message: fc.string({ maxLength: 80 }),
    }),
  );

  /** Well-formed data of each submitted type (docs/contract.md §9). */
  const FACT_DATA: Record<string, fc.Arbitrary<Json>> = {
    StepPlanned: fc.record(
      {
        run_id: ident,
        tool: ident,
        side_effect: fc.constantFrom('read', 'write'),
        input_hash: ident,
        policy: fc.record(
          {
            max_attempts: fc.integer({ min: 1, max: 100 }),
            consistency_window_ms: fc.nat(86_400_000),
            verification_tool: ident,
          },
          { requiredKeys: [] },
        ),
      },
      { requiredKeys: ['run_id', 'tool', 'side_effect', 'input_hash'] },
    ),
    AttemptDispatched: fc.record({ attempt: fc.integer({ min: 1, max: 1000 }), input_hash: ident }),
    EnvelopeRecorded: fc.record({ attempt: fc.integer({ min: 1, max: 1000 }), envelope }),
    VerificationRecorded: fc.record(
      {
        outcome: fc.constantFrom('found_committed', 'not_found', 'lookup_unavailable'),
        checked_at: instant,
        evidence_ref: ident,
        result: anyJson,
      },
      { requiredKeys: ['outcome', 'checked_at'] },
    ),
    ApprovalRecorded: fc.record(
      { decision: fc.constantFrom('granted', 'denied'), approver: ident, reason: fc.string({ maxLength: 200 }) },
      { requiredKeys: ['decision', 'approver'] },
    ),
  };
  const FACT_TYPES = Object.keys(FACT_DATA);

  /** Required, bounded fields per type: what a defect may remove or break. */
  const REQUIRED: Record<string, string[]> = {
    StepPlanned: ['run_id', 'tool', 'side_effect', 'input_hash'],
    AttemptDispatched: ['attempt', 'input_hash'],
    EnvelopeRecorded: ['attempt', 'envelope'],
    VerificationRecorded: ['outcome', 'checked_at'],
    ApprovalRecorded: ['decision', 'approver'],
  };

  const factOf = (type: string) =>
    fc.tuple(clientUuid, FACT_DATA[type]).map(([event_id, data]) => ({ event_id, type, data }));
  /** Facts that may follow the first in a batch: never a plan or a dispatch (see below). */
  const followingFact = fc.oneof(
    factOf('EnvelopeRecorded'),
    factOf('VerificationRecorded'),
    factOf('ApprovalRecorded'),
  );

  /**
   * Where a fact of each type may go so that, even well-formed, it is refused without a record: a
   * plan only to the succeeded operation (another definition: its names are upper case, which the
   * generators never produce), a dispatch only to operations never planned, the rest to either. The
   * first fact decides the batch: refused, it refuses the whole submit.
   */
  const withTarget = (type: string, ref: fc.Arbitrary<string>) =>
    fc
      .tuple(
        ref,
        factOf(type),
        fc.array(followingFact, { maxLength: 2 }),
        fc.option(fc.integer({ min: -1, max: 10 }), { nil: undefined }),
      )
      .map(([target, first, rest, expected]) => {
        const events = [first, ...rest].map((fact) =>
          fact.type === 'EnvelopeRecorded'
            ? { ...fact, data: { ...fact.data, envelope: { ...fact.data.envelope, operation_ref: target } } }
            : fact,
        );
        return {
          ref: target,
          type,
          body: { ...(expected === undefined ? {} : { expected_revision: expected }), events } as Json,
        };
      });
  const eitherRef = fc.oneof(fc.constant(SUCCEEDED_REF), unplannedRef);
  const wellFormed = fc.oneof(
    withTarget('StepPlanned', fc.constant(SUCCEEDED_REF)),
    withTarget('AttemptDispatched', unplannedRef),
    withTarget('EnvelopeRecorded', eitherRef),
    withTarget('VerificationRecorded', eitherRef),
    withTarget('ApprovalRecorded', eitherRef),
  );

  const wrongValue = (avoid: 'string' | 'number' | 'object') =>
    fc
      .oneof(
        fc.constant(null),
        fc.boolean(),
        fc.integer(),
        fc.double(),
        fc.string({ maxLength: 10 }),
        fc.array(fc.nat(), { maxLength: 2 }),
        fc.constant({}),
      )
      .filter((value) => {
        if (avoid === 'string') return typeof value !== 'string';
        if (avoid === 'number') return typeof value !== 'number' || !Number.isInteger(value) || value < 1;
        return value === null || typeof value !== 'object' || Array.isArray(value);
      });
  const WRONG_VALUES = { string: wrongValue('string'), number: wrongValue('number'), object: wrongValue('object') };

  interface Defect<T> {
    name: string;
    /** What the defect needs drawn, independent of the body (so it is built once). */
    draw: fc.Arbitrary<T>;
    /** Breaks the body (a copy); answers the body or the JSON text to send. */
    apply(body: Json, type: string, drawn: T): Json | string;
  }

  const levelOf = (body: Json, level: string) =>
    level === 'body' ? body : level === 'event' ? body.events[0] : body.events[0].data;
  const pick = <T>(list: readonly T[], n: number) => list[n % list.length];

  /** Defects, each making a submit invalid whatever else it holds. */
  const DEFECTS: Array<Defect<any>> = [
    {
      name: 'missing field',
      draw: fc.nat(),
      apply: (body, type, n: number) => (delete body.events[0].data[pick(REQUIRED[type], n)], body),
    },
    {
      name: 'wrong type',
      draw: fc.tuple(fc.nat(), WRONG_VALUES.string, WRONG_VALUES.number, WRONG_VALUES.object),
      apply: (body, type, [n, notString, notNumber, notObject]: [number, Json, Json, Json]) => {
        const field = pick(REQUIRED[type], n);
        const current = body.events[0].data[field];
        body.events[0].data[field] =
          typeof current === 'number' ? notNumber : typeof current === 'object' ? notObject : notString;
        return body;
      },
    },
    {
      name: 'unknown field',
      draw: fc.tuple(fc.stringMatching(/^x_[a-z]{1,10}$/), fc.constantFrom('body', 'event', 'data'), anyJson),
      apply: (body, _type, [key, level, value]: [string, string, Json]) => ((levelOf(body, level)[key] = value), body),
    },
    {
      name: 'bad event_id',
      draw: fc.oneof(fc.string({ maxLength: 40 }), fc.integer()),
      apply: (body, _type, id) => ((body.events[0].event_id = id), body),
    },
    {
      name: 'unknown type',
      draw: fc.string({ maxLength: 30 }).filter((type) => !FACT_TYPES.includes(type)),
      apply: (body, _type, type: string) => ((body.events[0].type = type), body),
    },
    {
      name: 'over-long string',
      draw: fc.integer({ min: 1001, max: 20_000 }),
      apply: (body, type, length: number) => {
        const field = REQUIRED[type].find(
          (name) =>
            typeof body.events[0].data[name] === 'string' &&
            !['side_effect', 'decision', 'outcome', 'checked_at'].includes(name),
        );
        if (field) body.events[0].data[field] = 'x'.repeat(length);
        else body.events[0].event_id = 'e'.repeat(length);
        return body;
      },
    },
    {
      name: 'prototype key',
      draw: fc.tuple(
        fc.constantFrom('__proto__', 'constructor', 'prototype'),
        fc.constantFrom('body', 'event', 'data'),
        fc.constantFrom('{"polluted":true}', '1', '"x"', '[]'),
      ),
      apply: (body, _type, [key, level, value]: [string, string, string]) => {
        levelOf(body, level).__MARK__ = 0;
        return JSON.stringify(body).replace('"__MARK__":0', `${JSON.stringify(key)}:${value}`);
      },
    },
    {
      name: 'too deep',
      draw: fc.integer({ min: 30, max: 2_000 }),
      apply: (body, _type, depth: number) => {
        body.events[0].data.deep = '__DEEP__';
        return JSON.stringify(body).replace('"__DEEP__"', `${'['.repeat(depth)}${']'.repeat(depth)}`);
      },
    },
    {
      name: 'events not a list',
      draw: fc.constantFrom<Json>([], {}, null, 'events', 1),
      apply: (body, _type, events) => ((body.events = events), body),
    },
    {
      name: 'too many events',
      draw: fc.constant(null),
      apply: (body) => ((body.events = Array.from({ length: MAX_EVENTS + 1 }, () => body.events[0])), body),
    },
    {
      name: 'bad expected_revision',
      draw: fc.constantFrom<Json>(-2, 1.5, '0', true, [], {}),
      apply: (body, _type, revision) => ((body.expected_revision = revision), body),
    },
    {
      name: 'repeated event_id',
      draw: fc.constant(null),
      apply: (body) => ((body.events = [...body.events, { ...body.events[0] }]), body),
    },
  ];

  const structuredInvalid: fc.Arbitrary<FuzzRequest> = fc
    .tuple(wellFormed, fc.oneof(...DEFECTS.map((defect) => defect.draw.map((drawn) => ({ defect, drawn })))))
    .map(([{ ref, type, body }, { defect, drawn }]) => {
      const broken = defect.apply(structuredClone(body), type, drawn);
      return {
        category: 'structured-invalid',
        method: 'POST',
        path: `${opPath(ref)}/events`,
        headers: { 'content-type': 'application/json', ...auth(RUNTIME_KEY) },
        body: typeof broken === 'string' ? broken : JSON.stringify(broken),
      };
    });

  const wellFormedRefused: fc.Arbitrary<FuzzRequest> = wellFormed.map(({ ref, body }) => ({
    category: 'well-formed-refused',
    method: 'POST',
    path: `${opPath(ref)}/events`,
    headers: { 'content-type': 'application/json', ...auth(RUNTIME_KEY) },
    body: JSON.stringify(body),
  }));

  const garbageText = fc.oneof(
    fc.json({ maxDepth: 4 }),
    fc.string({ unit: 'binary', maxLength: 200 }),
    fc.string({ maxLength: 200 }).map((text) => `{"events":[${text}`),
    fc.constantFrom(
      '',
      ' ',
      'null',
      '[]',
      '{}',
      '{"events":null}',
      '{"events":[{}]}',
      '\u0000',
      '{"a":1,}',
      '{"a":NaN}',
      '\ufeff{}',
      '{"events":[{"event_id":1e400}]}',
    ),
    fc.integer({ min: BODY_LIMIT + 1, max: BODY_LIMIT * 2 }).map((size) => `{"events":[],"pad":"${'p'.repeat(size)}"}`),
  );
  const garbageBody: fc.Arbitrary<FuzzRequest> = fc
    .tuple(
      unplannedRef,
      fc.oneof(
        garbageText,
        fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)),
      ),
      fc.constantFrom(
        'application/json',
        'application/json; charset=utf-8',
        'APPLICATION/JSON',
        'text/plain',
        'application/x-www-form-urlencoded',
        'application/octet-stream',
        'multipart/form-data; boundary=x',
        'application/merge-patch+json',
      ),
    )
    .map(([ref, body, contentType]) => ({
      category: 'garbage-body',
      method: 'POST',
      path: `${opPath(ref)}/events`,
      headers: { 'content-type': contentType, ...auth(RUNTIME_KEY) },
      body,
    }));

  /** Printable ASCII but space, %, ? and #: what may stand in a request line unencoded. */
  const rawPathChars = fc.string({
    unit: fc
      .integer({ min: 0x21, max: 0x7e })
      .filter((c) => ![0x23, 0x25, 0x3f].includes(c))
      .map((c) => String.fromCharCode(c)),
    maxLength: 30,
  });
  const segment = fc.oneof(
    ident,
    rawPathChars,
    fc.string({ unit: 'binary', maxLength: 20 }).map((text) => encodeURIComponent(text)),
    fc.constantFrom(
      '..',
      '.',
      '%2e%2e',
      '%2F',
      '%zz',
      '%',
      '%00',
      '%C0%AF',
      '%ff',
      encodeURIComponent(SUCCEEDED_REF),
      'r'.repeat(700),
      '%20'.repeat(3),
    ),
  );
  const PREFIXES = [
    '/v1/operations/',
    '/v1/operations',
    '/v1/runs/',
    '/v1/recovery',
    '/v1/metrics/trust',
    '/v1/schema/',
    '/v1/admin/',
    '/metrics',
    '/health/',
    '/docs/',
    '/ui/',
    '/',
    '/v2/',
    '//v1//operations/',
  ];
  const query = fc.array(
    fc.tuple(
      fc.constantFrom(
        'as_of_revision',
        'limit',
        'cursor',
        'status',
        'tool',
        'run_id',
        'older_than_ms',
        'wait_for_position',
        'wait_timeout_ms',
        'projection',
        'x',
      ),
      fc.oneof(
        rawPathChars,
        fc.integer().map(String),
        fc.string({ unit: 'binary', maxLength: 10 }).map((text) => encodeURIComponent(text)),
      ),
    ),
    { maxLength: 3 },
  );
  const credential = fc.constantFrom<Record<string, string>>(
    {},
    auth('not-a-key-0000000000000000'),
    { authorization: 'Basic dXNlcjpwYXNz' },
    { authorization: 'Bearer' },
    auth(RUNTIME_KEY),
    auth(AUDITOR_KEY),
    auth(ADMIN_KEY),
  );
  const paths: fc.Arbitrary<FuzzRequest> = fc
    .tuple(
      fc.constantFrom('GET', 'GET', 'GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'),
      fc.constantFrom(...PREFIXES),
      fc.array(segment, { maxLength: 3 }),
      query,
      credential,
      fc.option(fc.json({ maxDepth: 2 }), { nil: undefined }),
    )
    .filter(([method, , , , headers]) => !(method === 'POST' && headers.authorization === `Bearer ${ADMIN_KEY}`))
    // A numeric wait_for_position beyond the head waits for its timeout and answers 503
    // PROJECTION_LAGGING by design: a 5xx the fuzz must not count. Such values are left out.
    .filter(([, , , params]) => !params.some(([name, value]) => name === 'wait_for_position' && /^\d+$/.test(value)))
    .map(([method, prefix, segments, params, headers, body]) => ({
      category: 'paths',
      method,
      path: `${prefix}${segments.join('/')}${params.length ? `?${params.map(([name, value]) => `${name}=${value}`).join('&')}` : ''}`,
      headers: {
        ...headers,
        ...(body === undefined || method === 'GET' || method === 'HEAD' ? {} : { 'content-type': 'application/json' }),
      },
      body: method === 'GET' || method === 'HEAD' ? undefined : body,
    }));

  /** Roles that may not do what they ask: an auditor's or admin's submit, a runtime's admin call. */
  const wrongRole: fc.Arbitrary<FuzzRequest> = fc.oneof(
    fc.tuple(wellFormed, fc.constantFrom(AUDITOR_KEY, ADMIN_KEY)).map(([{ ref, body }, key]) => ({
      category: 'wrong-role',
      method: 'POST',
      path: `${opPath(ref)}/events`,
      headers: { 'content-type': 'application/json', ...auth(key) },
      body: JSON.stringify(body),
    })),
    fc
      .tuple(
        fc.constantFrom(RUNTIME_KEY, AUDITOR_KEY),
        fc.constantFrom('GET /v1/admin/export', 'POST /v1/admin/projections/rebuild'),
        fc.option(fc.constantFrom('evidence_trail', 'x', '%00'), { nil: undefined }),
      )
      .map(([key, route, projection]) => {
        const [method, path] = route.split(' ');
        return {
          category: 'wrong-role',
          method,
          path: `${path}${projection === undefined ? '' : `?projection=${projection}`}`,
          headers: auth(key),
        };
      }),
  );

  // ---- edges: shapes, numbers and instants that must be a 400 (or 422) naming the field ---------------

  const submitTo = (ref: string, text: string, statuses: number[], category: string): FuzzRequest => ({
    category,
    method: 'POST',
    path: `${opPath(ref)}/events`,
    headers: { 'content-type': 'application/json', ...auth(RUNTIME_KEY) },
    body: text,
    expect: { statuses },
  });

  /** Arrays where objects belong, at every level of a submit (`{"events":[[]]}` was a 500). */
  const nestedArrays: fc.Arbitrary<FuzzRequest> = fc
    .tuple(wellFormed, fc.nat(), fc.integer({ min: 1, max: 6 }))
    .map(([{ ref, body }, n, depth]) => {
      const first = body.events[0];
      const wrap = (value: Json) => Array.from({ length: depth }).reduce<Json>((inner) => [inner], value);
      const shapes: Json[] = [
        { events: [wrap([])] },
        { events: [wrap(first)] },
        { events: [first, wrap(first)].slice(n % 2) },
        { events: [null] },
        { events: [n] },
        { events: [String(n)] },
        { events: [{ ...first, data: wrap(first.data) }] },
        {
          events: [
            {
              ...first,
              data: {
                ...first.data,
                ...(first.type === 'EnvelopeRecorded'
                  ? { envelope: wrap(first.data.envelope) }
                  : first.type === 'StepPlanned'
                    ? { policy: wrap({}) }
                    : { attempt: wrap(1) }),
              },
            },
          ],
        },
        wrap(body),
      ];
      return submitTo(ref, JSON.stringify(pick(shapes, n)), [400], 'nested-arrays');
    });

  /** Numbers JSON.parse would round or turn into Infinity or 0, where a number may stand. */
  const HUGE = [
    '1e400',
    '-1e400',
    '12345678901234567890',
    '9007199254740993',
    '-9007199254740993',
    '1e-400',
    '4e309',
    '123456789012345678901234567890e10',
  ];
  const hugeNumbers: fc.Arbitrary<FuzzRequest> = fc
    .tuple(
      wellFormed,
      fc.constantFrom(...HUGE),
      fc.constantFrom('expected_revision', 'attempt', 'result', 'safe_detail'),
      clientUuid,
    )
    .map(([{ ref, body }, literal, where, eventId]) => {
      const events = structuredClone(body.events);
      if (where === 'attempt' && typeof events[0].data.attempt === 'number') events[0].data.attempt = '__NUM__';
      else if (where === 'result')
        events[0] = {
          event_id: eventId,
          type: 'VerificationRecorded',
          data: { outcome: 'found_committed', checked_at: '2026-01-01T00:00:00Z', result: { amount: '__NUM__' } },
        };
      else if (where === 'safe_detail') {
        events[0] = {
          event_id: eventId,
          type: 'EnvelopeRecorded',
          data: {
            attempt: 1,
            envelope: {
              ok: false,
              code: 'RATE_LIMITED',
              category: 'dependency',
              commit_state: 'not_committed',
              retry: { directive: 'after_delay', not_before: '2026-01-01T00:00:00Z', max_attempts_remaining: 1 },
              next_action: 'wait_and_retry',
              operation_ref: ref,
              safe_details: { limit: '__NUM__' },
              agent_message: 'slow down',
              user_message: 'later',
            },
          },
        };
      }
      const text = JSON.stringify(
        where === 'expected_revision' || !JSON.stringify(events).includes('__NUM__')
          ? { expected_revision: '__NUM__', events }
          : { events },
      );
      return submitTo(ref, text.replace('"__NUM__"', literal), [400], 'huge-numbers');
    });

  /** Instants a calendar does not have, without a time zone, or that are not RFC 3339 at all. */
  const ODD_INSTANTS = [
    '2026-02-30T00:00:00Z',
    '2027-02-29T12:00:00Z',
    '2026-04-31T00:00:00Z',
    '2026-02-28T10:00:00',
    '2026-02-28',
    '2026-02-28 10:00:00Z',
    '2026-06-30T23:59:60Z',
    '2026-13-01T00:00:00Z',
    '2026-02-28T24:00:00Z',
    '+275760-09-13T00:00:00Z',
    '2026-02-28T10:00:00+25:00',
    '20260228T100000Z',
  ];
  const oddInstants: fc.Arbitrary<FuzzRequest> = fc
    .tuple(
      eitherRef,
      fc.constantFrom(...ODD_INSTANTS),
      fc.constantFrom('checked_at', 'not_before', 'success_checked_at'),
      clientUuid,
    )
    .map(([ref, instant, where, eventId]) => {
      const data =
        where === 'checked_at'
          ? { outcome: 'not_found', checked_at: instant }
          : where === 'not_before'
            ? {
                attempt: 1,
                envelope: {
                  ok: false,
                  code: 'RATE_LIMITED',
                  category: 'dependency',
                  commit_state: 'not_committed',
                  retry: { directive: 'after_delay', not_before: instant, max_attempts_remaining: 1 },
                  next_action: 'wait_and_retry',
                  operation_ref: ref,
                  safe_details: {},
                  agent_message: 'slow down',
                  user_message: 'later',
                },
              }
            : {
                attempt: 1,
                envelope: {
                  ok: true,
                  operation_ref: ref,
                  commit_state: 'committed',
                  result: {},
                  verification: { checked_at: instant },
                },
              };
      const type = where === 'checked_at' ? 'VerificationRecorded' : 'EnvelopeRecorded';
      return submitTo(ref, JSON.stringify({ events: [{ event_id: eventId, type, data }] }), [400, 422], 'odd-instants');
    });

  const requests = fc.oneof(
    { arbitrary: structuredInvalid, weight: 34 },
    { arbitrary: wellFormedRefused, weight: 13 },
    { arbitrary: garbageBody, weight: 10 },
    { arbitrary: paths, weight: 24 },
    { arbitrary: wrongRole, weight: 5 },
    { arbitrary: nestedArrays, weight: 5 },
    { arbitrary: hugeNumbers, weight: 5 },
    { arbitrary: oddInstants, weight: 4 },
  );

  // ---- sending ----------------------------------------------------------------------------------------

  interface Answer {
    status: number;
    contentType: string;
    text: string;
  }

  function send(agent: Agent, port: number, fuzz: FuzzRequest): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const body =
        fuzz.body === undefined ? undefined : Buffer.isBuffer(fuzz.body) ? fuzz.body : Buffer.from(fuzz.body, 'utf8');
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          agent,
          method: fuzz.method,
          path: fuzz.path,
          headers: { ...fuzz.headers, ...(body ? { 'content-length': String(body.length) } : {}) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              contentType: String(res.headers['content-type'] ?? ''),
              text: Buffer.concat(chunks).toString('utf8'),
            }),
          );
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  /** What is wrong with an answer, or undefined. */
  function judge(fuzz: FuzzRequest, answer: Answer): string | undefined {
    if (answer.status >= 500) return `a ${answer.status}`;
    if (answer.status < 200 || (answer.status >= 300 && answer.status < 400)) return `an unexpected ${answer.status}`;
    if (answer.status < 300)
      return fuzz.method === 'GET' || fuzz.method === 'HEAD'
        ? undefined
        : `a ${fuzz.method} was accepted (${answer.status})`;
    if (!answer.contentType.startsWith('application/problem+json'))
      return `a ${answer.status} as ${answer.contentType || 'no content type'}`;
    if (fuzz.method === 'HEAD') return undefined;
    let body: any;
    try {
      body = JSON.parse(answer.text);
    } catch {
      return `a ${answer.status} whose body is not JSON`;
    }
    const definition = ERROR_REGISTRY[body?.code as keyof typeof ERROR_REGISTRY];
    if (!definition) return `an unregistered code ${JSON.stringify(body?.code)}`;
    if (definition.status !== answer.status || body.status !== answer.status)
      return `${body.code} answered as ${answer.status}`;
    if (fuzz.expect && !fuzz.expect.statuses.includes(answer.status))
      return `a ${answer.status} where ${fuzz.expect.statuses.join(' or ')} was due`;
    if (fuzz.expect && (typeof body.field !== 'string' || body.field === '')) return 'a refusal that names no field';
    return undefined;
  }

  function tableDump(dataDir: string): string {
    const db = new Database(join(dataDir, 'events.sqlite'), { readonly: true, fileMustExist: true });
    try {
      return JSON.stringify(db.prepare('SELECT * FROM events ORDER BY position').all());
    } finally {
      db.close();
    }
  }

  const describeRequest = (fuzz: FuzzRequest) => {
    const body =
      fuzz.body === undefined
        ? ''
        : Buffer.isBuffer(fuzz.body)
          ? ` <${fuzz.body.length} bytes>`
          : ` ${fuzz.body.slice(0, 300)}`;
    return `[${fuzz.category}] ${fuzz.method} ${fuzz.path.slice(0, 200)} ${JSON.stringify(fuzz.headers)}${body}`;
  };

  describe(`fuzzing the HTTP API (seed ${SEED}, ${RUNS} requests)`, () => {
    let ledger: LedgerProcess;
    beforeAll(async () => {
      ledger = await startLedger({
        env: {
          LEDGER_API_KEYS: KEYS,
          LEDGER_RATE_LIMIT_PER_MINUTE: '10000000',
          LEDGER_BODY_LIMIT_BYTES: String(BODY_LIMIT),
          LEDGER_MAX_EVENTS_PER_SUBMIT: String(MAX_EVENTS),
        },
      });
      const post = async (events: unknown[]) => {
        const response = await fetch(`${ledger.baseUrl}${opPath(SUCCEEDED_REF)}/events`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...auth(RUNTIME_KEY) },
          body: JSON.stringify({ events }),
        });
        expect(response.status).toBe(200);
        return (await response.json()) as { state: { status: string } };
      };
      await post([{ event_id: randomUUID(), type: 'StepPlanned', data: FIXTURE_PLAN }]);
      await post([
        {
          event_id: randomUUID(),
          type: 'AttemptDispatched',
          data: { attempt: 1, input_hash: FIXTURE_PLAN.input_hash },
        },
      ]);
      const done = await post([
        {
          event_id: randomUUID(),
          type: 'EnvelopeRecorded',
          data: {
            attempt: 1,
            envelope: {
              ok: true,
              operation_ref: SUCCEEDED_REF,
              commit_state: 'committed',
              result: { id: 'inv_1' },
              verification: { checked_at: new Date().toISOString() },
            },
          },
        },
      ]);
      expect(done.state.status).toBe('succeeded');
    });
    afterAll(async () => {
      await ledger?.stop();
      ledger?.cleanup();
    });

    test('no 5xx, a registered problem on every 4xx, and the events table byte-for-byte unchanged', async () => {
      const before = tableDump(ledger.dataDir);
      const cases = fc.sample(requests, { seed: SEED, numRuns: RUNS });
      const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
      const failures: string[] = [];
      const byCategory = new Map<string, number>();
      const byStatus = new Map<number, number>();
      let next = 0;
      const worker = async () => {
        while (next < cases.length) {
          const index = next++;
          const fuzz = cases[index];
          byCategory.set(fuzz.category, (byCategory.get(fuzz.category) ?? 0) + 1);
          let answer: Answer;
          try {
            answer = await send(agent, ledger.port, fuzz);
          } catch (error) {
            failures.push(`#${index} ${describeRequest(fuzz)}: the connection failed (${(error as Error).message})`);
            continue;
          }
          byStatus.set(answer.status, (byStatus.get(answer.status) ?? 0) + 1);
          const wrong = judge(fuzz, answer);
          if (wrong) failures.push(`#${index} ${describeRequest(fuzz)}: ${wrong}: ${answer.text.slice(0, 300)}`);
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      agent.destroy();

      expect({ seed: SEED, failures: failures.slice(0, 20), count: failures.length }).toEqual({
        seed: SEED,
        failures: [],
        count: 0,
      });
      expect(cases.length).toBeGreaterThanOrEqual(Math.min(RUNS, 10_000));
      // Every kind of request was really exercised, and the service really refused them.
      for (const category of [
        'structured-invalid',
        'well-formed-refused',
        'garbage-body',
        'paths',
        'wrong-role',
        'nested-arrays',
        'huge-numbers',
        'odd-instants',
      ]) {
        expect({ category, enough: (byCategory.get(category) ?? 0) > RUNS / 40 }).toEqual({ category, enough: true });
      }
      for (const status of [400, 401, 403, 404, 409, 413, 415])
        expect({ status, seen: (byStatus.get(status) ?? 0) > 0 }).toEqual({ status, seen: true });
      expect(tableDump(ledger.dataDir)).toBe(before);
    });
  });
});

describe('the auth matrix', () => {
  /**
   * The auth matrix, generated from the route table of the built application: every route Fastify
   * serves × (no key, a wrong key, runtime, approver, operator, auditor, admin, metrics) × (the caller's own tenant, another
   * tenant's), each with the status the rules of docs/contract.md §8 give it.
   *
   * The route table is read from the built app itself (a child process builds it with createApp,
   * records every route Fastify registers, and reads each controller handler's @RequireAccess
   * metadata), so a route added tomorrow is in the matrix without anyone listing it: it fails here
   * if it declares no access rule, if Fastify serves it outside a Nest controller (where the guard
   * does not run), or if its path names a parameter this file has no fixture for.
   *
   * The expected statuses come from the rules written out below, not from src/auth/access.ts, so
   * a change to the role table is a change to this test too.
   */
  const ROOT = resolve(__dirname, '../..');
  const DIST = join(ROOT, 'dist/src');

  // ---- the route table, from the built application -------------------------------------------------

  interface ServedRoute {
    method: string;
    url: string;
  }
  interface DeclaredRoute extends ServedRoute {
    access: string | null;
    handler: string;
  }

  const ROUTE_TABLE_SCRIPT = `
const { join } = require('node:path');
const { mkdtempSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const load = require('node:module').createRequire(${JSON.stringify(join(ROOT, 'package.json'))});
const DIST = ${JSON.stringify(DIST)};
const { createApp } = require(join(DIST, 'app.js'));
const { loadConfig } = require(join(DIST, 'config/ledger-config.js'));
const { ACCESS_KEY } = require(join(DIST, 'auth/access.js'));
const { ModulesContainer } = load('@nestjs/core');
const { RequestMethod } = load('@nestjs/common');
const { PATH_METADATA, METHOD_METADATA } = load('@nestjs/common/constants');
(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-routes-'));
  const config = loadConfig({ ...process.env, LEDGER_DATA_DIR: dir, LOG_LEVEL: 'silent' });
  const app = await createApp({ config });
  const served = [];
  app.getHttpAdapter().getInstance().addHook('onRoute', (route) => {
    for (const method of [].concat(route.method)) served.push({ method, url: route.url });
  });
  await app.init();
  const trim = (path) => String(path ?? '').replace(/^\\/+|\\/+$/g, '');
  const declared = [];
  for (const module of app.get(ModulesContainer).values()) {
    for (const wrapper of module.controllers.values()) {
      const controller = wrapper.metatype;
      if (!controller) continue;
      const bases = [].concat(Reflect.getMetadata(PATH_METADATA, controller) ?? '');
      for (const name of Object.getOwnPropertyNames(controller.prototype)) {
        const handler = controller.prototype[name];
        if (name === 'constructor' || typeof handler !== 'function') continue;
        const paths = Reflect.getMetadata(PATH_METADATA, handler);
        if (paths === undefined) continue;
        const method = RequestMethod[Reflect.getMetadata(METHOD_METADATA, handler)];
        const access = Reflect.getMetadata(ACCESS_KEY, handler) ?? Reflect.getMetadata(ACCESS_KEY, controller) ?? null;
        for (const base of bases) {
          for (const path of [].concat(paths)) {
            declared.push({ method, url: '/' + [trim(base), trim(path)].filter(Boolean).join('/'), access, handler: controller.name + '.' + name });
          }
        }
      }
    }
  }
  await app.close();
  rmSync(dir, { recursive: true, force: true });
  process.stdout.write(JSON.stringify({ served, declared }));
  process.exit(0);
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
`;

  function readRouteTable(): { served: ServedRoute[]; declared: DeclaredRoute[] } {
    const output = execFileSync(process.execPath, ['-e', ROUTE_TABLE_SCRIPT], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return JSON.parse(output);
  }

  // ---- the rules, as docs/contract.md §8 states them -------------------------------------------------------------

  type Role = 'runtime' | 'approver' | 'operator' | 'auditor' | 'admin' | 'metrics';
  type Access = 'public' | 'read' | 'write' | 'work' | 'admin' | 'metrics';
  const ACCESS_LEVELS: readonly Access[] = ['public', 'read', 'write', 'work', 'admin', 'metrics'];

  /**
   * runtime: submit and read its tenant, and take, renew and release work items (the feed is the
   * runtime's); approver: read it and submit approvals only; operator: read it and submit operator
   * facts only (docs/contract.md §4.10); auditor: read; admin: read, rebuild
   * projections, export, its tenant's metrics; metrics: the whole scrape only.
   */
  const ALLOWED: Record<Role, readonly Access[]> = {
    runtime: ['read', 'write', 'work'],
    approver: ['read', 'write'],
    operator: ['read', 'write'],
    auditor: ['read'],
    admin: ['read', 'admin', 'metrics'],
    metrics: ['metrics'],
  };

  const key = (label: string) => `${label}-${createHash('sha256').update(label).digest('hex').slice(0, 24)}`;
  const KEYS = {
    acmeRuntime: key('acme-runtime'),
    acmeAuditor: key('acme-auditor'),
    acmeAdmin: key('acme-admin'),
    acmeApprover: key('acme-approver'),
    acmeOperator: key('acme-operator'),
    metrics: key('metrics'),
    globexRuntime: key('globex-runtime'),
    globexAdmin: key('globex-admin'),
  };
  const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');
  const API_KEYS = [
    `${KEYS.acmeRuntime}:runtime:acme`,
    // The auditor's key is configured by its hash only: the matrix proves that form works too.
    `sha256:${sha256Hex(KEYS.acmeAuditor)}:auditor:acme`,
    `${KEYS.acmeAdmin}:admin:acme`,
    `${KEYS.acmeApprover}:approver:acme`,
    `${KEYS.acmeOperator}:operator:acme`,
    `${KEYS.metrics}:metrics:*`,
    `${KEYS.globexRuntime}:runtime:globex`,
    `${KEYS.globexAdmin}:admin:globex`,
  ].join(',');

  type Credential = 'none' | 'wrong' | Role;
  const CREDENTIALS: readonly Credential[] = [
    'none',
    'wrong',
    'runtime',
    'approver',
    'operator',
    'auditor',
    'admin',
    'metrics',
  ];
  const AUTHORIZATION: Record<Credential, Record<string, string>> = {
    none: {},
    wrong: { authorization: `Bearer ${key('nobody')}` },
    runtime: { authorization: `Bearer ${KEYS.acmeRuntime}` },
    auditor: { authorization: `Bearer ${KEYS.acmeAuditor}` },
    admin: { authorization: `Bearer ${KEYS.acmeAdmin}` },
    approver: { authorization: `Bearer ${KEYS.acmeApprover}` },
    operator: { authorization: `Bearer ${KEYS.acmeOperator}` },
    metrics: { authorization: `Bearer ${KEYS.metrics}` },
  };

  type Side = 'own' | 'other';
  const SIDES: readonly Side[] = ['own', 'other'];

  // ---- what the matrix acts on ------------------------------------------------------------------------

  const ACME_REF = 'run_acme/step_1';
  const GLOBEX_REF = 'run_globex/step_1';
  const ACME_PLAN = {
    event_id: randomUUID(),
    type: 'StepPlanned',
    data: { run_id: 'run_acme', tool: 'acme_tool', side_effect: 'write', input_hash: 'sha256:acme-input' },
  };
  const GLOBEX_TOOL = 'globex_secret_tool';
  const GLOBEX_INPUT = 'sha256:globex-input-7f3a';
  /** The worker holding globex's operation: who holds what is the tenant's data too. */
  const GLOBEX_WORKER = 'globex-secret-worker';
  const GLOBEX_PLAN = {
    event_id: randomUUID(),
    type: 'StepPlanned',
    data: { run_id: 'run_globex', tool: GLOBEX_TOOL, side_effect: 'write', input_hash: GLOBEX_INPUT },
  };

  /**
   * Path parameters that name a tenant's resource: the caller's own one, and one that exists only
   * in the other tenant, with the answer that other tenant's resource must get (as if it did not exist).
   */
  const TENANT_PARAMS: Record<string, { own: string; other: string; notFound: string }> = {
    ref: { own: ACME_REF, other: GLOBEX_REF, notFound: 'OPERATION_NOT_FOUND' },
    run_id: { own: 'run_acme', other: 'run_globex', notFound: 'RUN_NOT_FOUND' },
  };
  /** Path parameters of public static files, and ids no tenant has (a webhook subscription's). */
  const PUBLIC_PARAMS: Record<string, string> = {
    file: 'app.js',
    asset: 'swagger-ui.css',
    id: 'whk_no_such_subscription',
  };

  interface Exchange {
    body?: unknown;
    /** What an allowed caller gets; `other` only where a body decides it (a submit). */
    own: number;
    other?: { status: number; code?: string };
    /** What a role the route admits gets when the body holds a fact it may not record. */
    byRole?: Partial<Record<Role, { status: number; code: string }>>;
  }

  /** Routes that take a body (and what an allowed caller gets for it). Every POST needs one. */
  const EXCHANGES: Record<string, (side: Side) => Exchange> = {
    // Own tenant: a resubmission of the plan, answered as the first time and storing nothing.
    // Other tenant: a dispatch for the other tenant's operation, which does not exist in the
    // caller's namespace: it cannot be acted on.
    'POST /v1/operations/:ref/events': (side) => ({
      body:
        side === 'own'
          ? { events: [ACME_PLAN] }
          : {
              events: [
                { event_id: randomUUID(), type: 'AttemptDispatched', data: { attempt: 1, input_hash: GLOBEX_INPUT } },
              ],
            },
      own: 200,
      other: { status: 409, code: 'STEP_NOT_PLANNED' },
      // A plan and a dispatch are the runtime's facts: an approver records approvals only, an
      // operator operator facts only.
      byRole: { approver: { status: 403, code: 'FORBIDDEN' }, operator: { status: 403, code: 'FORBIDDEN' } },
    }),
    // Operator facts over many operations: each ref is decided alone inside a 200. Own tenant: a
    // ref with no step (refused for that ref, nothing stored, the matrix's plan untouched). Other
    // tenant: the other tenant's operation, which does not exist in the caller's namespace.
    'POST /v1/operator-facts': (side) => ({
      body: {
        fact: { type: 'StepCancelled', data: { reason: 'matrix' } },
        operations: [{ operation_ref: side === 'own' ? 'run_acme/no_such_step' : GLOBEX_REF, event_id: randomUUID() }],
      },
      own: 200,
      other: { status: 200 },
      // Only an operator records operator facts: the runtime and the approver are refused by the fact.
      byRole: { runtime: { status: 403, code: 'FORBIDDEN' }, approver: { status: 403, code: 'FORBIDDEN' } },
    }),
    'POST /v1/admin/projections/rebuild': () => ({ own: 202 }),
    'POST /v1/admin/verify': () => ({ own: 200 }),
    // A receiver nobody listens on: the matrix appends nothing after it, so nothing is sent.
    'POST /v1/admin/webhooks': () => ({ body: { url: 'https://hooks.example.com/hook' }, own: 201 }),
    'DELETE /v1/admin/webhooks/:id': () => ({ own: 404 }),
    'POST /v1/admin/webhooks/:id/rotate-secret': () => ({ body: {}, own: 404 }),
    'GET /v1/admin/webhooks/:id': () => ({ own: 404 }),
    'POST /v1/admin/webhooks/:id/test': () => ({ own: 404 }),
    'POST /v1/admin/webhooks/deliveries/:id/resend': () => ({ own: 404 }),
    // Leases are scoped by the caller's tenant: a lease id of no item in it holds nothing, in either.
    'POST /v1/operations/:ref/lease/renew': () => ({
      body: { lease_id: randomUUID() },
      own: 409,
      other: { status: 409, code: 'LEASE_LOST' },
    }),
    'POST /v1/operations/:ref/lease/release': () => ({
      body: { lease_id: randomUUID() },
      own: 200,
      other: { status: 200 },
    }),
  };

  /** Strings only the other tenant's data contains (never sent in an acme request). */
  const GLOBEX_MARKERS = [GLOBEX_TOOL, GLOBEX_INPUT, GLOBEX_PLAN.event_id, GLOBEX_WORKER];

  interface Case {
    route: DeclaredRoute & { served: string };
    credential: Credential;
    side: Side;
    path: string;
    body?: unknown;
    expect: { status: number | 'success'; code?: string };
  }

  function buildCases(route: DeclaredRoute & { served: string }): Case[] {
    const params = [...route.url.matchAll(/:([A-Za-z_]+)/g)].map((match) => match[1]);
    const tenantParam = params.find((name) => TENANT_PARAMS[name]);
    const exchangeOf = EXCHANGES[`${route.method} ${route.url}`];
    if (route.method !== 'GET' && !exchangeOf)
      throw new Error(`${route.method} ${route.url}: add an exchange (body and expected status) to EXCHANGES`);
    const cases: Case[] = [];
    for (const credential of CREDENTIALS) {
      for (const side of SIDES) {
        let path = route.url;
        for (const name of params) {
          const value = TENANT_PARAMS[name]?.[side] ?? PUBLIC_PARAMS[name];
          if (value === undefined)
            throw new Error(`${route.method} ${route.url}: add a fixture for the path parameter :${name}`);
          path = path.replace(`:${name}`, encodeURIComponent(value));
        }
        const exchange = exchangeOf?.(side);
        const access = route.access as Access;
        let expected: Case['expect'];
        if (access === 'public') expected = { status: exchange?.own ?? 'success' };
        else if (credential === 'none' || credential === 'wrong') expected = { status: 401, code: 'UNAUTHENTICATED' };
        else if (!ALLOWED[credential].includes(access)) expected = { status: 403, code: 'FORBIDDEN' };
        else if (exchange?.byRole?.[credential]) expected = exchange.byRole[credential] as Case['expect'];
        else if (side === 'other' && exchange?.other) expected = exchange.other;
        else if (side === 'other' && tenantParam) expected = { status: 404, code: TENANT_PARAMS[tenantParam].notFound };
        else expected = { status: exchange?.own ?? 'success' };
        cases.push({ route, credential, side, path, body: exchange?.body, expect: expected });
        // Fastify answers HEAD for every GET with the same handler, so through the same guard.
        if (route.method === 'GET')
          cases.push({ route: { ...route, served: 'HEAD' }, credential, side, path, expect: expected });
      }
    }
    return cases;
  }

  // ---- the run ------------------------------------------------------------------------------------------

  interface Outcome {
    label: string;
    status: number;
    contentType: string;
    text: string;
    expect: Case['expect'];
    method: string;
    credential: Credential;
  }

  const describeCase = (c: Case) =>
    `${c.route.served} ${c.route.url} as ${c.credential} on ${c.side} tenant (${c.path})`;

  async function send(baseUrl: string, c: Case): Promise<Outcome> {
    const headers: Record<string, string> = { ...AUTHORIZATION[c.credential] };
    if (c.body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(`${baseUrl}${c.path}`, {
      method: c.route.served,
      headers,
      body: c.body === undefined ? undefined : JSON.stringify(c.body),
    });
    return {
      label: describeCase(c),
      status: response.status,
      contentType: response.headers.get('content-type') ?? '',
      text: await response.text(),
      expect: c.expect,
      method: c.route.served,
      credential: c.credential,
    };
  }

  function rowsOf(dataDir: string): Array<Record<string, unknown>> {
    const db = new Database(join(dataDir, 'events.sqlite'), { readonly: true, fileMustExist: true });
    try {
      return db.prepare('SELECT * FROM events ORDER BY position').all() as Array<Record<string, unknown>>;
    } finally {
      db.close();
    }
  }

  describe('the auth matrix over every served route', () => {
    let ledger: LedgerProcess;
    let routes: Array<DeclaredRoute & { served: string }>;
    let served: ServedRoute[];
    let declared: DeclaredRoute[];
    const outcomes: Outcome[] = [];
    let globexRowsBefore: string;

    beforeAll(async () => {
      ({ served, declared } = readRouteTable());
      routes = declared.map((route) => ({ ...route, served: route.method }));

      ledger = await startLedger({ env: { LEDGER_API_KEYS: API_KEYS, LEDGER_RATE_LIMIT_PER_MINUTE: '10000000' } });
      const post = (ref: string, token: string, events: unknown[]) =>
        fetch(`${ledger.baseUrl}${opPath(ref)}/events`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify({ events }),
        }).then(async (response) => ({
          status: response.status,
          body: (await response.json()) as { position: number },
        }));
      // Both tenants have an operation in flight, so the recovery list and the run summary of each
      // have something to show (and to leak, if isolation failed).
      expect((await post(ACME_REF, KEYS.acmeRuntime, [ACME_PLAN])).status).toBe(200);
      expect(
        (
          await post(ACME_REF, KEYS.acmeRuntime, [
            {
              event_id: randomUUID(),
              type: 'AttemptDispatched',
              data: { attempt: 1, input_hash: 'sha256:acme-input' },
            },
          ])
        ).status,
      ).toBe(200);
      expect((await post(GLOBEX_REF, KEYS.globexRuntime, [GLOBEX_PLAN])).status).toBe(200);
      // A globex worker holds its operation through the matrix, so GET /v1/operations/:ref/lease has
      // a holder to leak to an acme key if tenants were not kept apart.
      const taken = await fetch(`${ledger.baseUrl}/v1/work?worker=${GLOBEX_WORKER}&wait_ms=5000&lease_ms=600000`, {
        headers: { authorization: `Bearer ${KEYS.globexRuntime}` },
      });
      expect(
        ((await taken.json()) as { items: Array<{ lease: { holder: string } }> }).items.map(
          (item) => item.lease.holder,
        ),
      ).toEqual([GLOBEX_WORKER]);
      const last = await post(GLOBEX_REF, KEYS.globexRuntime, [
        { event_id: randomUUID(), type: 'AttemptDispatched', data: { attempt: 1, input_hash: GLOBEX_INPUT } },
      ]);
      expect(last.status).toBe(200);
      // Read-your-writes: the projections have applied everything before the matrix reads them.
      const caughtUp = await fetch(
        `${ledger.baseUrl}/v1/runs/run_globex?wait_for_position=${last.body.position}&wait_timeout_ms=20000`,
        {
          headers: { authorization: `Bearer ${KEYS.globexRuntime}` },
        },
      );
      expect(caughtUp.status).toBe(200);
      globexRowsBefore = JSON.stringify(
        rowsOf(ledger.dataDir).filter((row) => String(row.stream).startsWith('op-globex:')),
      );

      // Reads first, then what changes something (a rebuild empties the read models while it runs).
      const cases = routes
        .flatMap(buildCases)
        .sort((a, b) => Number(a.route.method !== 'GET') - Number(b.route.method !== 'GET'));
      for (const c of cases) outcomes.push(await send(ledger.baseUrl, c));
    }, 120_000);

    afterAll(async () => {
      await ledger?.stop();
      ledger?.cleanup();
    });

    test('the route table is what the service serves, and every route declares an access rule', () => {
      const key = (route: ServedRoute) => `${route.method} ${route.url}`;
      const declaredKeys = new Set(declared.map(key));
      // Fastify adds HEAD for every GET; anything else it serves must come from a controller, or
      // it bypasses the guard.
      const outsideNest = served.filter(
        (route) => !declaredKeys.has(key(route)) && !(route.method === 'HEAD' && declaredKeys.has(`GET ${route.url}`)),
      );
      expect(outsideNest).toEqual([]);
      const withoutRule = declared.filter((route) => !ACCESS_LEVELS.includes(route.access as Access));
      expect(withoutRule.map((route) => `${key(route)} (${route.handler})`)).toEqual([]);
      // The table is the real one: the spec's core routes are in it.
      // The work feed is for runtime keys only: an approver key must not take or renew work items.
      const feed = declared.filter((route) =>
        ['GET /v1/work', 'POST /v1/operations/:ref/lease/renew', 'POST /v1/operations/:ref/lease/release'].includes(
          key(route),
        ),
      );
      expect(feed.map((route) => route.access)).toEqual(['work', 'work', 'work']);
      for (const expected of [
        'POST /v1/operations/:ref/events',
        'GET /v1/operations/:ref',
        'GET /v1/operations/:ref/events',
        'GET /v1/operations/:ref/lease',
        'GET /v1/schema/envelope',
      ]) {
        expect(declaredKeys).toContain(expected);
      }
    });

    test('every cell of the matrix answers its expected status', () => {
      const wrong = outcomes
        .filter(({ status, expect: e }) =>
          e.status === 'success' ? status < 200 || status > 299 : status !== e.status,
        )
        .map(
          (o) =>
            `${o.label}: expected ${o.expect.status}${o.expect.code ? ` ${o.expect.code}` : ''}, got ${o.status} ${o.text.slice(0, 200)}`,
        );
      expect(wrong).toEqual([]);
      // The matrix is as wide as promised: every route × 8 credentials × 2 tenants (and HEAD for GET).
      expect(outcomes.length).toBe(routes.reduce((sum, route) => sum + (route.method === 'GET' ? 32 : 16), 0));
    });

    test('every refusal is a problem+json with its registered code', () => {
      const wrong = outcomes
        .filter((o) => o.expect.code !== undefined && o.method !== 'HEAD')
        .filter((o) => {
          const body = JSON.parse(o.text);
          const code = body.code as keyof typeof ERROR_REGISTRY;
          return (
            !o.contentType.startsWith('application/problem+json') ||
            code !== o.expect.code ||
            ERROR_REGISTRY[code]?.status !== o.status
          );
        })
        .map((o) => `${o.label}: ${o.contentType} ${o.text.slice(0, 200)}`);
      expect(wrong).toEqual([]);
    });

    test("no answer to an acme key carries anything of globex's data", () => {
      // The metrics key belongs to no tenant: the operator's scraper sees the whole process (below).
      const leaks = outcomes
        .filter((o) => o.credential !== 'metrics' && GLOBEX_MARKERS.some((marker) => o.text.includes(marker)))
        .map((o) => o.label);
      expect(leaks).toEqual([]);
    });

    test("/metrics: an admin sees its tenant's series only, nothing process-wide; the metrics key sees all", () => {
      const scrape = (credential: Credential) =>
        outcomes.find(
          (o) =>
            o.method === 'GET' &&
            o.label.startsWith('GET /metrics ') &&
            o.credential === credential &&
            o.status === 200,
        )?.text ?? '';
      const admin = scrape('admin');
      expect(admin).toMatch(/tenant="acme"/);
      expect(admin).not.toMatch(/tenant="globex"|tenant=""/);
      // Process-wide series (CPU, memory, group commits, projection lag) show every tenant's load together.
      expect(admin).not.toMatch(
        /^(process_|nodejs_|ledger_store_group_commit|ledger_projection_lag|ledger_projection_readable)/m,
      );
      const all = scrape('metrics');
      expect(all).toMatch(/tenant="globex"/);
      expect(all).toMatch(/^process_cpu_user_seconds_total/m);
    });

    test("another tenant's operation is refused without a trace in either namespace", () => {
      const rows = rowsOf(ledger.dataDir);
      expect(JSON.stringify(rows.filter((row) => String(row.stream).startsWith('op-globex:')))).toBe(globexRowsBefore);
      // The refused dispatch for globex's ref created nothing under acme's name either.
      expect(rows.filter((row) => row.stream === `op-acme:${GLOBEX_REF}`)).toEqual([]);
    });

    test('the isolation check can see a leak: globex reading its own data finds its markers', async () => {
      const own = await fetch(`${ledger.baseUrl}/v1/recovery`, {
        headers: { authorization: `Bearer ${KEYS.globexRuntime}` },
      });
      expect(own.status).toBe(200);
      expect(await own.text()).toContain(GLOBEX_REF);
      const exported = await fetch(`${ledger.baseUrl}/v1/admin/export`, {
        headers: { authorization: `Bearer ${KEYS.globexAdmin}` },
      });
      expect(exported.status).toBe(200);
      expect(await exported.text()).toContain(GLOBEX_TOOL);
      const lease = await fetch(`${ledger.baseUrl}${opPath(GLOBEX_REF)}/lease`, {
        headers: { authorization: `Bearer ${KEYS.globexRuntime}` },
      });
      expect(await lease.json()).toMatchObject({ held: true, holder: GLOBEX_WORKER });
    });
  });
});

describe('approvals', () => {
  /**
   * Approvals come from approvers (docs/contract.md §4, §8): what the start-up log says of them
   * (src/main.ts's, so a process of its own), the explicit self-approval setting, and local mode.
   * The approval matrix itself is test/int/security-approvals.int.spec.ts's.
   */

  describe('approver keys for every tenant', () => {
    let ledger: LedgerProcess;
    beforeAll(async () => {
      ledger = await startLedger({
        env: { LEDGER_API_KEYS: KEYS, LEDGER_RATE_LIMIT_PER_MINUTE: '1000000', LOG_LEVEL: 'info' },
      });
    });
    afterAll(async () => {
      await ledger?.stop();
      ledger?.cleanup();
    });

    test('the start-up log says nothing of self-approval when it is off, and warns of none missing', () => {
      expect(ledger.output()).not.toContain('SELF-APPROVAL');
      expect(ledger.output()).not.toContain('no approver key');
    });
  });

  describe('running without a separate approver', () => {
    test('LEDGER_ALLOW_SELF_APPROVAL=true lets a runtime key approve, and the start-up log says so at warn level', async () => {
      const runtime = keyOf('solo', 'runtime');
      const ledger = await startLedger({
        env: {
          LEDGER_API_KEYS: `${runtime}:runtime:solo,${keyOf('solo', 'auditor')}:auditor:solo`,
          LEDGER_ALLOW_SELF_APPROVAL: 'true',
          LOG_LEVEL: 'info',
        },
      });
      try {
        const ref = `run_pay/self_${randomUUID().slice(0, 8)}`;
        await awaitingApproval(ledger, ref, runtime);
        const answer = await request(
          ledger.baseUrl,
          'POST',
          `${opPath(ref)}/events`,
          { events: [approval()] },
          approvalAuth(runtime),
        );
        expect(answer.status).toBe(200);
        // Auditors still may not.
        const ref2 = `run_pay/self_${randomUUID().slice(0, 8)}`;
        await awaitingApproval(ledger, ref2, runtime);
        expect(
          (
            await request(
              ledger.baseUrl,
              'POST',
              `${opPath(ref2)}/events`,
              { events: [approval()] },
              approvalAuth(keyOf('solo', 'auditor')),
            )
          ).status,
        ).toBe(403);
        const line = ledger
          .output()
          .split('\n')
          .find((text) => text.includes('LEDGER_ALLOW_SELF_APPROVAL'));
        expect(line && JSON.parse(line)).toMatchObject({ level: 'warn', setting: 'LEDGER_ALLOW_SELF_APPROVAL' });
      } finally {
        await ledger.stop();
        ledger.cleanup();
      }
    });

    test('keys without an approver key for a tenant, and the setting off: the start-up log names the tenant', async () => {
      const ledger = await startLedger({
        env: { LEDGER_API_KEYS: `${keyOf('lonely', 'runtime')}:runtime:lonely`, LOG_LEVEL: 'info' },
      });
      try {
        const line = ledger
          .output()
          .split('\n')
          .find((text) => text.includes('no approver key'));
        expect(line && JSON.parse(line)).toMatchObject({ level: 'warn', tenants: ['lonely'] });
      } finally {
        await ledger.stop();
        ledger.cleanup();
      }
    });

    test('local mode: the one local caller records approvals, and says so at start', async () => {
      const ledger = await startLedger({ env: { LOG_LEVEL: 'info' } });
      try {
        const ref = `run_pay/local_${randomUUID().slice(0, 8)}`;
        await awaitingApproval(ledger, ref, 'unused-in-local-mode');
        expect((await request(ledger.baseUrl, 'POST', `${opPath(ref)}/events`, { events: [approval()] })).status).toBe(
          200,
        );
        expect(ledger.output()).toContain('there is no separate approver in local mode');
      } finally {
        await ledger.stop();
        ledger.cleanup();
      }
    });
  });
});

describe('the service at start', () => {
  /**
   * Local mode and the start-up checks of the built service (docs/contract.md §8–9): what src/main.ts
   * says when it starts without keys, and when it refuses to start; both are the process's own, so they
   * run it. The keys and tenants themselves are test/int/security-auth.int.spec.ts's.
   */
  describe('local mode and the start-up checks', () => {
    test('without keys the service binds to loopback only, with tenant "default" and actor "local", and says so', async () => {
      const ledger = await startLedger({ env: { LEDGER_RATE_LIMIT_PER_MINUTE: '10000000' } });
      try {
        const ref = 'run_local/step_1';
        expect(
          (
            await keyCall(ledger.baseUrl, 'POST', `${opPath(ref)}/events`, undefined, {
              events: [keyPlan('run_local', 'create_invoice')],
            })
          ).status,
        ).toBe(200);
        const [row] = rawRows(ledger.dataDir);
        expect(row.stream).toBe(`op-default:${ref}`);
        expect(JSON.parse(String(row.metadata))).toMatchObject({ actor: 'local', tenant: 'default' });
        expect(ledger.output()).toMatch(/LOCAL MODE/);
        expect(ledger.output()).toMatch(/127\.0\.0\.1/);
      } finally {
        await ledger.stop();
        ledger.cleanup();
      }
    });

    /** Runs the built service to its exit (it must not start), answering its exit code and output. */
    async function refusedStart(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
      const dataDir = mkdtempSync(join(tmpdir(), 'ledger-refused-'));
      const child = spawn(process.execPath, [MAIN], {
        env: {
          ...process.env,
          PORT: String(await freePort()),
          LEDGER_DATA_DIR: dataDir,
          LEDGER_API_KEYS: '',
          LEDGER_API_KEYS_FILE: '',
          ...env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk) => (output += chunk));
      child.stderr.on('data', (chunk) => (output += chunk));
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      rmSync(dataDir, { recursive: true, force: true });
      return { code, output };
    }

    test.each(['0.0.0.0', '::', '192.0.2.10'])(
      'asked to bind to %s without keys, it refuses to start with a clear message',
      async (host) => {
        const { code, output } = await refusedStart({ HOST: host });
        expect(code).toBe(1);
        expect(output).toContain(`refusing to listen on ${host} without API keys`);
        expect(output).not.toMatch(/listening on/);
      },
    );

    test.each([
      ['a malformed entry', 'just-a-key-without-role'],
      ['an unknown role', 'abcdefghijklmnopqrstu:superuser:acme'],
      ['a short key', 'short:runtime:acme'],
      ['a bad hash', 'sha256:1234:runtime:acme'],
      ['a bad tenant', 'abcdefghijklmnopqrstu:runtime:Acme Corp'],
    ])('with %s in LEDGER_API_KEYS it refuses to start, naming the entry but not its key', async (_name, entry) => {
      const { code, output } = await refusedStart({ LEDGER_API_KEYS: entry });
      expect(code).toBe(1);
      expect(output).toMatch(/API key entry 1/);
      expect(output).not.toContain(entry.split(':')[0] === 'sha256' ? entry : entry.split(':')[0]);
    });
  });
});

describe('long polls', () => {
  /**
   * One tenant must not starve the others with long polls (docs/security.md, "Limits"), over real
   * HTTP against the built service: one runtime key holds its due steps under leases and opens many
   * `GET /v1/work?wait_ms=…` and `GET /v1/changes?wait_ms=…` polls at once. Beyond the caps per key
   * and per tenant they are refused 429 RATE_LIMITED with Retry-After; meanwhile another tenant's
   * submits all succeed and `/health/live` answers. Counts and waits are bounded; no speed is asserted.
   */
  const ACME_KEY = `polls-acme-runtime-${randomUUID()}`;
  const ACME_KEY_2 = `polls-acme-runtime2-${randomUUID()}`;
  const GLOBEX_KEY = `polls-globex-runtime-${randomUUID()}`;
  const PER_KEY = 6;
  const PER_TENANT = 10;
  const POLLS_PER_ROUTE = 40;
  const SUBMITS = 40;
  const TOOL = 'poll_tool';

  const as = (key: string) => ({ authorization: `Bearer ${key}` });

  interface Poll {
    done: Promise<{ status: number; retryAfter: string | null; code?: string } | 'aborted'>;
    settled?: { status: number; retryAfter: string | null; code?: string } | 'aborted';
  }

  describe('long polls are capped per key and per tenant', () => {
    let ledger: LedgerProcess;
    const abort = new AbortController();

    function open(path: string, key: string): Poll {
      const poll: Poll = {
        done: fetch(`${ledger.baseUrl}${path}`, { headers: as(key), signal: abort.signal })
          .then(async (response) => {
            const text = await response.text();
            const code = response.headers.get('content-type')?.startsWith('application/problem+json')
              ? (JSON.parse(text).code as string)
              : undefined;
            return { status: response.status, retryAfter: response.headers.get('retry-after'), code };
          })
          .catch(() => 'aborted' as const),
      };
      void poll.done.then((value) => (poll.settled = value));
      return poll;
    }

    beforeAll(async () => {
      ledger = await startLedger({
        env: {
          LEDGER_API_KEYS: `${ACME_KEY}:runtime:acme,${ACME_KEY_2}:runtime:acme,${GLOBEX_KEY}:runtime:globex`,
          LEDGER_RATE_LIMIT_PER_MINUTE: '10000000',
          LEDGER_LONG_POLLS_PER_KEY: String(PER_KEY),
          LEDGER_LONG_POLLS_PER_TENANT: String(PER_TENANT),
        },
      });
      // acme's due steps, all held by one of its workers: every poll finds only held items.
      for (let index = 0; index < 5; index++) {
        const planned = await request(
          ledger.baseUrl,
          'POST',
          `${opPath(`run_polls/step_${index}`)}/events`,
          {
            events: [
              fact('StepPlanned', {
                run_id: 'run_polls',
                tool: TOOL,
                side_effect: 'write',
                input_hash: `sha256:polls-${index}`,
              }),
            ],
          },
          as(ACME_KEY),
        );
        expect(planned.status).toBe(200);
      }
      // The feed may hand them out over several answers (each as the projection reaches it); a step
      // once leased to `holder` is not offered again, so the leased refs are gathered across answers.
      const leased = new Set<string>();
      await until(
        async () => {
          const answer = await request(
            ledger.baseUrl,
            'GET',
            `/v1/work?worker=holder&tool=${TOOL}&limit=10&wait_ms=1000&lease_ms=600000`,
            undefined,
            as(ACME_KEY),
          );
          expect(answer.status).toBe(200);
          for (const item of answer.body.items as Array<{ operation_ref: string }>) leased.add(item.operation_ref);
          return leased.size;
        },
        (count) => count === 5,
        'the five steps leased',
      );
    }, 60_000);

    afterAll(async () => {
      abort.abort();
      await ledger?.kill();
      ledger?.cleanup();
    });

    test('the excess polls get 429 with Retry-After; the other tenant and the probes keep being answered', async () => {
      const polls: Poll[] = [];
      for (let index = 0; index < POLLS_PER_ROUTE; index++) {
        polls.push(open(`/v1/work?worker=w${index}&tool=${TOOL}&wait_ms=30000`, ACME_KEY));
        polls.push(open(`/v1/changes?after=1000000000&wait_ms=30000`, ACME_KEY));
      }
      // The same tenant's second key gets what the tenant's cap leaves over the first key's share.
      const second = Array.from({ length: POLLS_PER_ROUTE }, (_, index) =>
        open(`/v1/work?worker=v${index}&tool=${TOOL}&wait_ms=30000`, ACME_KEY_2),
      );

      const refused = (list: Poll[]) =>
        list.filter((poll) => poll.settled !== undefined && poll.settled !== 'aborted' && poll.settled.status === 429);
      await until(
        async () => refused(polls).length,
        (count) => count === 2 * POLLS_PER_ROUTE - PER_KEY,
        'the first key refused beyond its cap',
        30_000,
      );
      await until(
        async () => refused(second).length,
        (count) => count === POLLS_PER_ROUTE - (PER_TENANT - PER_KEY),
        "the tenant's cap refusing the second key",
        30_000,
      );
      for (const poll of [...refused(polls), ...refused(second)]) {
        const answer = poll.settled as { status: number; retryAfter: string | null; code?: string };
        expect(answer.code).toBe('RATE_LIMITED');
        expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
      }
      // The admitted ones are still waiting.
      expect([...polls, ...second].filter((poll) => poll.settled === undefined)).toHaveLength(PER_TENANT);

      // While they wait: every one of globex's submits is stored, and the liveness probe answers.
      const results: number[] = [];
      for (let batch = 0; batch < SUBMITS; batch += 8) {
        const answers = await Promise.all(
          Array.from({ length: 8 }, (_, offset) =>
            request(
              ledger.baseUrl,
              'POST',
              `${opPath(`run_globex/step_${batch + offset}`)}/events`,
              {
                events: [
                  fact('StepPlanned', {
                    run_id: 'run_globex',
                    tool: 'globex_tool',
                    side_effect: 'write',
                    input_hash: `sha256:g-${batch + offset}`,
                  }),
                ],
              },
              as(GLOBEX_KEY),
            ),
          ),
        );
        results.push(...answers.map((answer) => answer.status));
        expect((await request(ledger.baseUrl, 'GET', '/health/live')).status).toBe(200);
      }
      expect(results).toEqual(Array.from({ length: SUBMITS }, () => 200));
      // Another tenant has caps of its own: its long polls are not refused.
      const globexPoll = await request(ledger.baseUrl, 'GET', '/v1/work?wait_ms=200', undefined, as(GLOBEX_KEY));
      expect(globexPoll.status).toBe(200);
    }, 90_000);

    test('a slot is free again once its poll has ended', async () => {
      // The second key's admitted polls end when their sockets close; its next poll is let in.
      abort.abort();
      const again = await until(
        () =>
          request(ledger.baseUrl, 'GET', `/v1/work?worker=again&tool=${TOOL}&wait_ms=100`, undefined, as(ACME_KEY_2)),
        (answer) => answer.status === 200,
        'a poll of the second key let in again',
      );
      expect(again.body).toEqual({ items: [] });
    }, 30_000);
  });
});
