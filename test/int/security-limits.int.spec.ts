/**
 * The limits of docs/security.md over real HTTP on the built service: body size, events per submit, string
 * lengths, nesting depth, prototype-pollution keys, per-key rate limits and the response headers.
 * Every refused body is one the service would otherwise have accepted and stored (a valid fact on
 * an operation waiting for it), so "the events table is unchanged" proves the limit caught it.
 */
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { ERROR_REGISTRY } from '@recovery-ledger/core';
import { opPath } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

const RUNTIME_KEY = 'limits-runtime-key-5c1d9e0f2a7b';
const AUDITOR_KEY = 'limits-auditor-key-8e2f4a6c1b3d';
const KEYS = `${RUNTIME_KEY}:runtime:acme,${AUDITOR_KEY}:auditor:acme`;

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

async function call(
  ledger: LedgerProcess,
  method: string,
  path: string,
  options: { body?: string; key?: string | null; contentType?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  const key = options.key === undefined ? RUNTIME_KEY : options.key;
  if (key !== null) headers.authorization = `Bearer ${key}`;
  if (options.body !== undefined) headers['content-type'] = options.contentType ?? 'application/json';
  const response = await fetch(`${ledger.baseUrl}${path}`, { method, headers, body: options.body });
  const text = await response.text();
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: response.status, headers: response.headers, text, body };
}

function expectProblem(answer: Answer, status: number, code: string, field?: string): void {
  expect({
    status: answer.status,
    code: answer.body?.code,
    ...(field === undefined ? {} : { field: answer.body?.field }),
  }).toEqual({
    status,
    code,
    ...(field === undefined ? {} : { field }),
  });
  expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(ERROR_REGISTRY[code as keyof typeof ERROR_REGISTRY].status).toBe(status);
}

function tableDump(ledger: LedgerProcess): string {
  const db = new Database(join(ledger.dataDir, 'events.sqlite'), { readonly: true, fileMustExist: true });
  try {
    return JSON.stringify(db.prepare('SELECT * FROM events ORDER BY position').all());
  } finally {
    db.close();
  }
}

const REF = 'run_limits/step_1';
const eventsPath = `${opPath(REF)}/events`;
const verification = (result: unknown) => ({
  event_id: randomUUID(),
  type: 'VerificationRecorded',
  data: { outcome: 'found_committed', checked_at: new Date().toISOString(), evidence_ref: 'inv_1', result },
});
const submitBody = (...events: unknown[]) => JSON.stringify({ events });

/** Plans and dispatches REF: a verification (with any result) is then accepted and stored. */
async function dispatched(ledger: LedgerProcess): Promise<void> {
  const plan = {
    event_id: randomUUID(),
    type: 'StepPlanned',
    data: { run_id: 'run_limits', tool: 'create_invoice', side_effect: 'write', input_hash: 'sha256:in' },
  };
  expect((await call(ledger, 'POST', eventsPath, { body: submitBody(plan) })).status).toBe(200);
  const dispatch = { event_id: randomUUID(), type: 'AttemptDispatched', data: { attempt: 1, input_hash: 'sha256:in' } };
  expect((await call(ledger, 'POST', eventsPath, { body: submitBody(dispatch) })).status).toBe(200);
}

const nested = (depth: number, leaf: unknown = 1): unknown => {
  let value = leaf;
  for (let level = 0; level < depth; level++) value = { n: value };
  return value;
};

describe('body limits', () => {
  let ledger: LedgerProcess;
  beforeAll(async () => {
    ledger = await startLedger({
      env: {
        LEDGER_API_KEYS: KEYS,
        LEDGER_MAX_EVENTS_PER_SUBMIT: '3',
        LEDGER_BODY_LIMIT_BYTES: '131072',
        LEDGER_RATE_LIMIT_PER_MINUTE: '10000000',
      },
    });
    await dispatched(ledger);
  });
  afterAll(async () => {
    await ledger.stop();
    ledger.cleanup();
  });

  test('a body over LEDGER_BODY_LIMIT_BYTES is 413 PAYLOAD_TOO_LARGE and stores nothing', async () => {
    const before = tableDump(ledger);
    const over = submitBody(
      verification({ blob: 'b'.repeat(60_000) }),
      verification({ blob: 'b'.repeat(60_000) }),
      verification({ blob: 'b'.repeat(60_000) }),
    );
    expectProblem(await call(ledger, 'POST', eventsPath, { body: over }), 413, 'PAYLOAD_TOO_LARGE');
    expect(tableDump(ledger)).toBe(before);
  });

  test('more events than LEDGER_MAX_EVENTS_PER_SUBMIT is 400 naming events', async () => {
    const before = tableDump(ledger);
    const four = submitBody(...Array.from({ length: 4 }, () => verification({ ok: 1 })));
    expectProblem(await call(ledger, 'POST', eventsPath, { body: four }), 400, 'BAD_REQUEST', 'events');
    expect(tableDump(ledger)).toBe(before);
  });

  test('a string longer than 64 KiB anywhere, even in a free-form result, is 400 naming it', async () => {
    const before = tableDump(ledger);
    const answer = await call(ledger, 'POST', eventsPath, {
      body: submitBody(verification({ receipt: { text: 'r'.repeat(64 * 1024 + 1) } })),
    });
    expectProblem(answer, 400, 'BAD_REQUEST', 'events[0].data.result.receipt.text');
    const longKey = await call(ledger, 'POST', eventsPath, {
      body: submitBody(verification({ ['k'.repeat(257)]: 1 })),
    });
    expectProblem(longKey, 400, 'BAD_REQUEST', 'events[0].data.result');
    expect(tableDump(ledger)).toBe(before);
  });

  test('JSON nested deeper than 32 levels is 400 before validation, however deep (no 5xx, no stack overflow)', async () => {
    const before = tableDump(ledger);
    // The body is level 1, events 2, the event 3, data 4: a result of 29 nested objects reaches 33.
    expectProblem(
      await call(ledger, 'POST', eventsPath, { body: submitBody(verification(nested(29))) }),
      400,
      'BAD_REQUEST',
      'body',
    );
    // Far deeper than any recursive walk of the body would survive, and still well under the size limit.
    const deepArrays = `{"events":[{"event_id":"${randomUUID()}","type":"VerificationRecorded","data":{"outcome":"found_committed","checked_at":"${new Date().toISOString()}","result":${'['.repeat(60_000)}${']'.repeat(60_000)}}}]}`;
    expectProblem(await call(ledger, 'POST', eventsPath, { body: deepArrays }), 400, 'BAD_REQUEST', 'body');
    const deepObjects = `${'{"n":'.repeat(20_000)}1${'}'.repeat(20_000)}`;
    expectProblem(await call(ledger, 'POST', eventsPath, { body: deepObjects }), 400, 'BAD_REQUEST', 'body');
    expect(tableDump(ledger)).toBe(before);
  });

  test('prototype-pollution keys anywhere in the body are 400 naming the key', async () => {
    const before = tableDump(ledger);
    const inResult = await call(ledger, 'POST', eventsPath, {
      body: submitBody(verification({ items: [{ constructor: { name: 'x' } }] })),
    });
    expectProblem(inResult, 400, 'BAD_REQUEST', 'events[0].data.result.items[0].constructor');
    const prototypeKey = await call(ledger, 'POST', eventsPath, {
      body: submitBody(verification({ prototype: { polluted: true } })),
    });
    expectProblem(prototypeKey, 400, 'BAD_REQUEST', 'events[0].data.result.prototype');
    const atTop = await call(ledger, 'POST', eventsPath, {
      body: `{"constructor":1,"events":[${JSON.stringify(verification(1))}]}`,
    });
    expectProblem(atTop, 400, 'BAD_REQUEST', 'constructor');
    // __proto__ and constructor.prototype are refused by the parser itself.
    const proto = await call(ledger, 'POST', eventsPath, {
      body: `{"events":[{"event_id":"${randomUUID()}","type":"VerificationRecorded","data":{"outcome":"found_committed","checked_at":"${new Date().toISOString()}","result":{"__proto__":{"admin":true}}}}]}`,
    });
    expectProblem(proto, 400, 'BAD_REQUEST', 'body');
    expect(tableDump(ledger)).toBe(before);
    // Nothing was polluted on the way: an ordinary submit still works, and one exactly 32 levels
    // deep (a result of 28 nested objects) is within the limit and stored as sent.
    const fine = await call(ledger, 'POST', eventsPath, { body: submitBody(verification(nested(28, 'leaf'))) });
    expect(fine.status).toBe(200);
    expect(fine.body.state.status).toBe('succeeded');
    const stored = await call(ledger, 'GET', `${opPath(REF)}/events`);
    expect(
      stored.body.events.find((event: { type: string }) => event.type === 'VerificationRecorded').data.result,
    ).toEqual(nested(28, 'leaf'));
  });
});

describe('per-key rate limits (LEDGER_RATE_LIMIT_PER_MINUTE=5)', () => {
  let ledger: LedgerProcess;
  beforeAll(async () => {
    ledger = await startLedger({ env: { LEDGER_API_KEYS: KEYS, LEDGER_RATE_LIMIT_PER_MINUTE: '5' } });
  });
  afterAll(async () => {
    await ledger.stop();
    ledger.cleanup();
  });

  test('the sixth request of a key in a minute is 429 RATE_LIMITED with Retry-After, and is not carried out', async () => {
    const plan = () =>
      submitBody({
        event_id: randomUUID(),
        type: 'StepPlanned',
        data: { run_id: 'run_rate', tool: 'create_invoice', side_effect: 'write', input_hash: 'sha256:in' },
      });
    const statuses: number[] = [];
    for (let index = 0; index < 5; index++) statuses.push((await call(ledger, 'GET', opPath('run_rate/none'))).status);
    expect(statuses).toEqual([404, 404, 404, 404, 404]);
    const before = tableDump(ledger);
    const limited = await call(ledger, 'POST', `${opPath('run_rate/step_1')}/events`, { body: plan() });
    expectProblem(limited, 429, 'RATE_LIMITED');
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60).toBe(true);
    expect(limited.body.retry_after_seconds).toBe(retryAfter);
    expect(tableDump(ledger)).toBe(before);
  });

  test('limits are per key: another key of the same tenant still gets through', async () => {
    expect((await call(ledger, 'GET', opPath('run_rate/none'), { key: AUDITOR_KEY })).status).toBe(404);
  });

  test('requests without a known key are limited by address, so keys cannot be guessed at speed', async () => {
    const statuses: number[] = [];
    for (let index = 0; index < 7; index++)
      statuses.push(
        (await call(ledger, 'GET', opPath('run_rate/none'), { key: `guess-${index}-0000000000000000` })).status,
      );
    // The start-up probe of the test harness came from this address too, so the first 429 may come
    // one request early; after it, every guess is refused without being checked.
    const first = statuses.indexOf(429);
    expect(first).toBeGreaterThanOrEqual(4);
    expect(statuses.slice(0, first).every((status) => status === 401)).toBe(true);
    expect(statuses.slice(first).every((status) => status === 429)).toBe(true);
  });
});

describe('response headers', () => {
  let ledger: LedgerProcess;
  beforeAll(async () => {
    ledger = await startLedger({ env: { LEDGER_API_KEYS: KEYS, LEDGER_RATE_LIMIT_PER_MINUTE: '10000000' } });
  });
  afterAll(async () => {
    await ledger.stop();
    ledger.cleanup();
  });

  const hardened = (answer: Answer) => ({
    nosniff: answer.headers.get('x-content-type-options'),
    referrer: answer.headers.get('referrer-policy'),
    frames: answer.headers.get('x-frame-options'),
    poweredBy: answer.headers.get('x-powered-by'),
  });
  const HARDENED = { nosniff: 'nosniff', referrer: 'no-referrer', frames: 'DENY', poweredBy: null };

  test('every API answer — success, refusal, parser error, unknown route — is hardened and not cacheable', async () => {
    const answers = {
      ok: await call(ledger, 'GET', '/v1/schema/envelope'),
      unauthenticated: await call(ledger, 'GET', opPath('run_h/step'), { key: null }),
      notFound: await call(ledger, 'GET', '/v1/nothing-here'),
      brokenJson: await call(ledger, 'POST', `${opPath('run_h/step')}/events`, { body: '{"events": [' }),
      tooDeep: await call(ledger, 'POST', `${opPath('run_h/step')}/events`, { body: JSON.stringify(nested(40)) }),
    };
    for (const [name, answer] of Object.entries(answers)) {
      expect({ name, ...hardened(answer) }).toEqual({ name, ...HARDENED });
      expect({ name, csp: answer.headers.get('content-security-policy') }).toEqual({
        name,
        csp: expect.stringContaining("default-src 'none'"),
      });
      expect({ name, csp: answer.headers.get('content-security-policy') }).toEqual({
        name,
        csp: expect.stringContaining("frame-ancestors 'none'"),
      });
      expect({ name, cache: answer.headers.get('cache-control') }).toEqual({ name, cache: 'no-store' });
    }
    expect(answers.ok.status).toBe(200);
    expect(answers.unauthenticated.status).toBe(401);
    expect(answers.notFound.status).toBe(404);
    expect(answers.brokenJson.status).toBe(400);
    expect(answers.tooDeep.status).toBe(400);
  });

  test('pages keep the policy they set; a page without one gets a strict page policy', async () => {
    const ui = await call(ledger, 'GET', '/ui', { key: null });
    expect(ui.status).toBe(200);
    expect(hardened(ui)).toEqual(HARDENED);
    expect(ui.headers.get('content-security-policy')).toContain("script-src 'self'");
    const docs = await call(ledger, 'GET', '/docs', { key: null });
    expect(docs.status).toBe(200);
    expect(hardened(docs)).toEqual(HARDENED);
    const policy = docs.headers.get('content-security-policy') ?? '';
    expect(policy).toContain("script-src 'self'");
    expect(policy).not.toContain('unsafe-eval');
    expect(policy).toContain("frame-ancestors 'none'");
  });
});
