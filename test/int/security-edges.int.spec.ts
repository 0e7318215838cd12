/**
 * The edges of the HTTP surface (docs/security.md): slow headers and slow bodies cut off at the
 * configured timeouts, a body without a key refused before it is read, malformed shapes as 400s
 * naming the field, odd values refused rather than rounded or rolled over, Retry-After capped,
 * text/plain answered 415, client event ids that cannot collide with derived ones, and refs that
 * are one operation in any Unicode normal form and refused with bidi or invisible characters.
 *
 * The timeouts are configured small here so the sockets close fast; each check allows the
 * configured timeout plus Node's checking interval and a margin for a loaded machine, far below
 * Node's own defaults (60 s for headers, 300 s for a request) that applied before.
 */
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { derivedEventId } from '../../src/ledger/event-ids';
import { fact, opPath, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';
import { seedEnvelopes as ENVELOPES } from '../../packages/core/test/support/seed-envelopes';

const RUNTIME_KEY = 'edges-runtime-key-5b7d9f1a3c5e7092';
const auth = { authorization: `Bearer ${RUNTIME_KEY}` };
const HEADERS_TIMEOUT_MS = 600;
const REQUEST_TIMEOUT_MS = 1200;
/** Node checks at a quarter of the headers timeout here; the rest is room for a busy machine. */
const SLACK_MS = 3000;

interface SocketEnd {
  closedAfterMs: number;
  received: string;
}

/** Opens a raw socket, writes `head`, then one byte of `trickle` every `everyMs` until the server closes it. */
function slowRequest(
  port: number,
  head: string,
  trickle: string,
  everyMs: number,
  giveUpMs: number,
): Promise<SocketEnd> {
  return new Promise((resolve) => {
    const started = Date.now();
    let received = '';
    let index = 0;
    const socket: Socket = connect(port, '127.0.0.1', () => socket.write(head));
    const timer = setInterval(() => {
      if (index < trickle.length && socket.writable) socket.write(trickle[index++]);
    }, everyMs);
    const giveUp = setTimeout(() => socket.destroy(), giveUpMs);
    socket.on('data', (chunk) => (received += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(timer);
      clearTimeout(giveUp);
      resolve({ closedAfterMs: Date.now() - started, received });
    });
  });
}

const planText = (ref: string) =>
  JSON.stringify({
    events: [fact('StepPlanned', { run_id: 'run_e', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1' })],
  }) + ' '.repeat(ref.length);

describe('timeouts and early refusal (small configured timeouts)', () => {
  let ledger: LedgerProcess;
  beforeAll(async () => {
    ledger = await startLedger({
      env: {
        LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme`,
        LEDGER_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
        LEDGER_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
        LEDGER_RATE_LIMIT_PER_MINUTE: '1000000',
      },
    });
  });
  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  test('a socket that trickles its headers is closed once the headers timeout has passed', async () => {
    const end = await slowRequest(
      ledger.port,
      'GET /v1/recovery HTTP/1.1\r\nHost: 127.0.0.1\r\n',
      'X-Slow: ' + 'a'.repeat(500),
      100,
      60_000,
    );
    expect(end.closedAfterMs).toBeLessThan(HEADERS_TIMEOUT_MS + SLACK_MS);
    expect(end.received).toMatch(/^HTTP\/1\.1 408/);
  });

  test('an authenticated request that trickles its body is closed once the request timeout has passed', async () => {
    const body = planText('x');
    const head = `POST ${opPath('run_e/slow_body')}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${RUNTIME_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const end = await slowRequest(ledger.port, head, body, 100, 60_000);
    expect(end.closedAfterMs).toBeLessThan(REQUEST_TIMEOUT_MS + SLACK_MS);
    expect(end.received).not.toMatch(/^HTTP\/1\.1 200/);
  });

  test('many slow sockets at once are all closed, and the service keeps answering', async () => {
    const body = planText('x');
    const head = `POST ${opPath('run_e/many')}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${RUNTIME_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const slow = Array.from({ length: 100 }, () => slowRequest(ledger.port, head, body, 200, 60_000));
    const meanwhile = await request(ledger.baseUrl, 'GET', '/v1/recovery', undefined, auth);
    expect(meanwhile.status).toBe(200);
    const ends = await Promise.all(slow);
    expect(Math.max(...ends.map((end) => end.closedAfterMs))).toBeLessThan(REQUEST_TIMEOUT_MS + SLACK_MS);
  });
});

describe('a body without a key is refused before it is read', () => {
  let ledger: LedgerProcess;
  beforeAll(async () => {
    // Long timeouts: the 401 must come from the early check, not from a timeout.
    ledger = await startLedger({
      env: {
        LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme`,
        LEDGER_REQUEST_TIMEOUT_MS: '60000',
        LEDGER_RATE_LIMIT_PER_MINUTE: '1000000',
      },
    });
  });
  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  test.each([
    ['no key', ''],
    ['an unknown key', 'Authorization: Bearer not-a-key-but-long-enough-0000\r\n'],
  ])('%s: 401 while the body has not been sent, and the connection closed', async (_what, authorization) => {
    const head = `POST ${opPath('run_e/early')}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n${authorization}Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n`;
    // Nothing of the body is ever sent: only the early check can answer.
    const end = await slowRequest(ledger.port, head, '', 1000, 20_000);
    expect(end.received).toMatch(/^HTTP\/1\.1 401/);
    expect(end.received).toMatch(/connection: close/i);
    expect(end.received).toContain('"code":"UNAUTHENTICATED"');
    expect(end.closedAfterMs).toBeLessThan(10_000);
  });

  test('fifty such sockets at once are all answered 401 and closed', async () => {
    const head = `POST ${opPath('run_e/early')}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n`;
    const ends = await Promise.all(Array.from({ length: 50 }, () => slowRequest(ledger.port, head, '', 1000, 20_000)));
    expect(ends.filter((end) => !/^HTTP\/1\.1 401/.test(end.received))).toEqual([]);
  });
});

describe('shapes and values', () => {
  let ledger: LedgerProcess;
  const submitText = (ref: string, text: string, contentType = 'application/json') =>
    request(ledger.baseUrl, 'POST', `${opPath(ref)}/events`, text, { ...auth, 'content-type': contentType });
  const submit = (ref: string, events: unknown[], extra: Record<string, unknown> = {}) =>
    request(ledger.baseUrl, 'POST', `${opPath(ref)}/events`, { events, ...extra }, auth);
  const plan = (tool = 'create_invoice') =>
    fact('StepPlanned', { run_id: 'run_e', tool, side_effect: 'write', input_hash: 'h1' });
  const refused = (answer: { status: number; body: any }) => ({
    status: answer.status,
    code: answer.body?.code,
    field: answer.body?.field,
  });

  beforeAll(async () => {
    ledger = await startLedger({
      env: { LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme`, LEDGER_RATE_LIMIT_PER_MINUTE: '1000000' },
    });
  });
  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  const rows = () => {
    const db = new Database(join(ledger.dataDir, 'events.sqlite'), { readonly: true, fileMustExist: true });
    try {
      return (db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n;
    } finally {
      db.close();
    }
  };

  test.each([
    ['{"events":[[]]}', 'events[0]'],
    [
      `{"events":[[${JSON.stringify(fact('StepPlanned', { run_id: 'r', tool: 't', side_effect: 'write', input_hash: 'h' }))}]]}`,
      'events[0]',
    ],
    ['{"events":[null]}', 'events[0]'],
    ['{"events":["x"]}', 'events[0]'],
    [`{"events":[{"event_id":"${randomUUID()}","type":"StepPlanned","data":[]}]}`, 'events[0].data'],
    [
      `{"events":[{"event_id":"${randomUUID()}","type":"EnvelopeRecorded","data":{"attempt":1,"envelope":[]}}]}`,
      'events[0].data.envelope',
    ],
  ])('%s is a 400 naming %s', async (text, field) => {
    expect(refused(await submitText('run_e/shapes', text))).toEqual({ status: 400, code: 'BAD_REQUEST', field });
  });

  test.each([
    ['1e400', 'expected_revision'],
    ['12345678901234567890', 'expected_revision'],
    ['9007199254740993', 'expected_revision'],
  ])('expected_revision %s is refused, not rounded', async (literal, field) => {
    const text = `{"expected_revision":${literal},"events":[${JSON.stringify(plan())}]}`;
    expect(refused(await submitText('run_e/huge', text))).toEqual({ status: 400, code: 'BAD_REQUEST', field });
  });

  test('a huge number in a free-form result is refused with its path, not stored as null', async () => {
    const ref = `run_e/huge_result_${randomUUID().slice(0, 6)}`;
    expect((await submit(ref, [plan()])).status).toBe(200);
    expect((await submit(ref, [fact('AttemptDispatched', { attempt: 1, input_hash: 'h1' })])).status).toBe(200);
    expect(
      (await submit(ref, [fact('EnvelopeRecorded', { attempt: 1, envelope: ENVELOPES.outcomeUnknown(ref) })])).status,
    ).toBe(200);
    const before = rows();
    const verification = JSON.stringify({
      events: [
        fact('VerificationRecorded', {
          outcome: 'found_committed',
          checked_at: new Date().toISOString(),
          result: { amount: '__N__' },
        }),
      ],
    }).replace('"__N__"', '1e400');
    expect(refused(await submitText(ref, verification))).toEqual({
      status: 400,
      code: 'BAD_REQUEST',
      field: 'events[0].data.result.amount',
    });
    expect(rows()).toBe(before);
  });

  test.each(['2026-02-30T10:00:00Z', '2026-02-28T10:00:00', '2026-02-28', '2026-06-30T23:59:60Z'])(
    'checked_at %s is a 400',
    async (checkedAt) => {
      const answer = await submit('run_e/instants', [
        fact('VerificationRecorded', { outcome: 'not_found', checked_at: checkedAt }),
      ]);
      expect(refused(answer)).toEqual({ status: 400, code: 'BAD_REQUEST', field: 'events[0].data.checked_at' });
    },
  );

  test('not_before on a date that does not exist is a 422 naming it', async () => {
    const ref = `run_e/feb30_${randomUUID().slice(0, 6)}`;
    expect((await submit(ref, [plan(), fact('AttemptDispatched', { attempt: 1, input_hash: 'h1' })])).status).toBe(200);
    const answer = await submit(ref, [
      fact('EnvelopeRecorded', { attempt: 1, envelope: ENVELOPES.rateLimited(ref, '2026-02-30T00:00:00Z') }),
    ]);
    expect(refused(answer)).toEqual({
      status: 422,
      code: 'ENVELOPE_INVALID',
      field: 'events[0].data.envelope.retry.not_before',
    });
  });

  test('not_before in year 9999: the refusal keeps the instant, Retry-After is capped at a day', async () => {
    const ref = `run_e/y9999_${randomUUID().slice(0, 6)}`;
    expect((await submit(ref, [plan(), fact('AttemptDispatched', { attempt: 1, input_hash: 'h1' })])).status).toBe(200);
    expect(
      (
        await submit(ref, [
          fact('EnvelopeRecorded', { attempt: 1, envelope: ENVELOPES.rateLimited(ref, '9999-12-31T23:59:59Z') }),
        ])
      ).status,
    ).toBe(200);
    const answer = await submit(ref, [fact('AttemptDispatched', { attempt: 2, input_hash: 'h1' })]);
    expect(answer.body.code).toBe('RETRY_NOT_BEFORE');
    expect(answer.headers.get('retry-after')).toBe('86400');
    expect(answer.body.retry_after_seconds).toBe(86400);
    expect(answer.body.directive.not_before).toBe('9999-12-31T23:59:59Z');
  });

  test('text/plain is 415, as promised', async () => {
    expect(refused(await submitText('run_e/plain', JSON.stringify({ events: [plan()] }), 'text/plain'))).toEqual({
      status: 415,
      code: 'UNSUPPORTED_MEDIA_TYPE',
      field: 'content-type',
    });
  });

  test('a client event_id equal to an id the ledger derived is refused (400), never a 409 on every retry', async () => {
    const ref = `run_e/ids_${randomUUID().slice(0, 6)}`;
    const first = plan();
    expect((await submit(ref, [first])).status).toBe(200);
    const derived = derivedEventId(first.event_id, 1);
    const events = (await request(ledger.baseUrl, 'GET', `${opPath(ref)}/events`, undefined, auth)).body.events.map(
      (event: { event_id: string }) => event.event_id,
    );
    expect(events).toContain(derived);
    const clash = { ...fact('AttemptDispatched', { attempt: 1, input_hash: 'h1' }), event_id: derived };
    expect(refused(await submit(ref, [clash]))).toEqual({
      status: 400,
      code: 'BAD_REQUEST',
      field: 'events[0].event_id',
    });
  });

  test('refs are one operation in any normal form (NFC); bidi, invisible and look-alike characters are refused', async () => {
    const composed = `caf\u00e9/step_${randomUUID().slice(0, 6)}`;
    const decomposed = composed.normalize('NFD');
    expect(decomposed).not.toBe(composed);
    expect((await submit(composed, [plan()])).status).toBe(200);
    const read = await request(ledger.baseUrl, 'GET', opPath(decomposed), undefined, auth);
    expect({ status: read.status, ref: read.body.operation_ref }).toEqual({ status: 200, ref: composed });
    // A plan under the decomposed form is the same operation: a duplicate, not a second one.
    const again = await submit(decomposed, [plan()]);
    expect(again.status).toBe(200);
    expect(again.body.revision).toBe(1);
    for (const ref of ['run_e/\u202Eevil', 'run_e/zero\u200Bwidth', 'run_e\u2215step', '\uFEFFrun_e/bom']) {
      expect(refused(await submit(ref, [plan()]))).toEqual({
        status: 400,
        code: 'BAD_REQUEST',
        field: 'operation_ref',
      });
    }
  });

  test('tracestate: a well-formed one is kept with the fact, a malformed one dropped, one holding a credential refused', async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const metadataOf = (ref: string) => {
      const db = new Database(join(ledger.dataDir, 'events.sqlite'), { readonly: true, fileMustExist: true });
      try {
        return (
          db.prepare('SELECT metadata FROM events WHERE stream = ? ORDER BY revision').all(`op-acme:${ref}`) as Array<{
            metadata: string;
          }>
        ).map((row) => JSON.parse(row.metadata));
      } finally {
        db.close();
      }
    };
    const send = (ref: string, tracestate: string) =>
      request(
        ledger.baseUrl,
        'POST',
        `${opPath(ref)}/events`,
        { events: [plan()] },
        { ...auth, traceparent, tracestate },
      );
    const good = `run_e/trace_good_${randomUUID().slice(0, 6)}`;
    expect((await send(good, 'congo=t61rcWkgMzE, rojo=00f067aa0ba902b7')).status).toBe(200);
    expect(metadataOf(good)[0].tracestate).toBe('congo=t61rcWkgMzE, rojo=00f067aa0ba902b7');
    const bad = `run_e/trace_bad_${randomUUID().slice(0, 6)}`;
    expect((await send(bad, 'not a tracestate at all')).status).toBe(200);
    expect(metadataOf(bad)[0].tracestate).toBeUndefined();
    const secret = `run_e/trace_secret_${randomUUID().slice(0, 6)}`;
    expect(refused(await send(secret, 'vendor=ghp_16C7e42F292c6912E7710c838347Ae178B4a'))).toEqual({
      status: 422,
      code: 'SECRET_IN_IDENTIFIER',
      field: 'tracestate',
    });
    expect(metadataOf(secret)).toEqual([]);
  });

  test('a JSON key shaped like a token is not echoed in the refusal', async () => {
    const token = 'ghp_16C7e42F292c6912E7710c838347Ae178B4a';
    const answer = await submit('run_e/key', [{ ...plan(), data: { ...plan().data, [token]: 1 } }]);
    expect(answer.status).toBe(400);
    expect(JSON.stringify(answer.body)).not.toContain(token);
    expect(answer.body.field).toBe('events[0].data.<key>');
  });
});
