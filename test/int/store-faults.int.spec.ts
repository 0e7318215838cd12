/**
 * Faults of the embedded store, injected for real into the SQLite file the service writes, with
 * the whole HTTP application in front of it (Fastify's inject: no socket, the same wiring as the
 * served app):
 *
 * - a full disk: `PRAGMA max_page_count` pinned to the file's current size on the store's own
 *   connection, so the next write that needs a page fails with SQLITE_FULL;
 * - a busy database: a second better-sqlite3 connection to the same file holding the write lock
 *   (BEGIN IMMEDIATE) while the store's busy timeout runs out (SQLITE_BUSY);
 * - a read-only database: `PRAGMA query_only` on the store's connection (SQLITE_READONLY). chmod
 *   would not do: CI runs as root, for whom file modes do not stop writes, and an open file keeps
 *   the access it was opened with anyway.
 *
 * Each must answer 503 STORE_UNAVAILABLE with Retry-After, leave the events table exactly as it
 * was (compared row by row, bytes and all), keep reads working, and heal without a restart once
 * the fault is lifted: the very same submit (same event ids) is then appended, not a duplicate,
 * which proves nothing of the failed attempt was stored.
 */
import Database from 'better-sqlite3';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp } from '../../src/app';
import { loadConfig } from '../../src/config/ledger-config';
import { isErrorCode } from '../../src/errors/error-registry';
import { SqliteEventStore } from '../../src/store/sqlite/sqlite-event-store.adapter';

const REF = 'run_faults/step_1';
const PATH = `/v1/operations/${encodeURIComponent(REF)}`;

interface Harness {
  app: NestFastifyApplication;
  file: string;
  pragma: (statement: string) => unknown;
  dir: string;
}

async function start(): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-store-faults-'));
  const file = join(dir, 'events.sqlite');
  let pragma: ((statement: string) => unknown) | undefined;
  // A busy timeout of 50 ms: long enough to be a real wait on the lock, short enough that the
  // test never waits on the 5 s default. No assertion depends on it.
  const store = SqliteEventStore.open({ file, busyTimeoutMs: 50, exposePragma: (run) => (pragma = run) });
  const config = loadConfig({ LEDGER_DATA_DIR: dir, LOG_LEVEL: 'silent' });
  const app = await createApp({ config, store });
  await app.init();
  await app.getHttpAdapter().getInstance().ready();
  return { app, file, dir, pragma: pragma as (statement: string) => unknown };
}

const submit = (h: Harness, events: unknown[]) =>
  h.app.inject({ method: 'POST', url: `${PATH}/events`, headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ events }) });

const fact = (type: string, data: Record<string, unknown>, event_id = randomUUID()) => ({ event_id, type, data });

/** Every byte of every row, through a connection of its own (read-only: it takes no lock). */
function tableDump(file: string): string {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return JSON.stringify(db.prepare('SELECT position, stream, revision, event_id, type, data, metadata FROM events ORDER BY position').all());
  } finally {
    db.close();
  }
}

/** A verification the dispatched step accepts, made large enough to need new pages of the file. */
const bigVerification = (id?: string) =>
  fact(
    'VerificationRecorded',
    { outcome: 'found_committed', checked_at: new Date().toISOString(), evidence_ref: 'inv_9', result: { receipt: 'r'.repeat(40_000) } },
    id,
  );

function expectUnavailable(answer: { statusCode: number; headers: Record<string, unknown>; body: string }): void {
  expect(answer.statusCode).toBe(503);
  expect(String(answer.headers['content-type'])).toMatch(/^application\/problem\+json/);
  const body = JSON.parse(answer.body);
  expect(body.code).toBe('STORE_UNAVAILABLE');
  expect(isErrorCode(body.code)).toBe(true);
  const retryAfter = Number(answer.headers['retry-after']);
  expect(Number.isInteger(retryAfter) && retryAfter > 0).toBe(true);
  expect(body.retry_after_seconds).toBe(retryAfter);
  // No driver text, path or stack in the answer.
  expect(answer.body).not.toMatch(/sqlite|SQLITE|\.sqlite|at .*\.js:\d+/);
}

interface Fault {
  name: string;
  sqliteCode: string;
  inject(h: Harness): void;
  lift(h: Harness): void;
}

let lockHolder: Database.Database | undefined;

const FAULTS: Fault[] = [
  {
    name: 'a full disk (max_page_count)',
    sqliteCode: 'SQLITE_FULL',
    inject: (h) => {
      const [{ page_count }] = h.pragma('page_count') as Array<{ page_count: number }>;
      h.pragma(`max_page_count = ${page_count}`);
    },
    lift: (h) => {
      h.pragma('max_page_count = 1073741823');
    },
  },
  {
    name: 'a second connection holding the write lock',
    sqliteCode: 'SQLITE_BUSY',
    inject: (h) => {
      lockHolder = new Database(h.file, { timeout: 0 });
      lockHolder.exec('BEGIN IMMEDIATE');
    },
    lift: () => {
      lockHolder?.exec('ROLLBACK');
      lockHolder?.close();
      lockHolder = undefined;
    },
  },
  {
    name: 'a read-only database (query_only)',
    sqliteCode: 'SQLITE_READONLY',
    inject: (h) => {
      h.pragma('query_only = 1');
    },
    lift: (h) => {
      h.pragma('query_only = 0');
    },
  },
];

describe.each(FAULTS)('the store under $name', (fault) => {
  let h: Harness;

  beforeEach(async () => {
    h = await start();
    expect((await submit(h, [fact('StepPlanned', { run_id: 'run_faults', tool: 'create_invoice', side_effect: 'write', input_hash: 'sha256:in-1' })])).statusCode).toBe(200);
    expect((await submit(h, [fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:in-1' })])).statusCode).toBe(200);
  });

  afterEach(async () => {
    fault.lift(h);
    await h.app.close();
    rmSync(h.dir, { recursive: true, force: true });
  });

  it(`answers 503 STORE_UNAVAILABLE with Retry-After (${fault.sqliteCode}), stores nothing, and heals by itself`, async () => {
    const before = tableDump(h.file);
    const verificationId = randomUUID();
    fault.inject(h);

    // A fact that would move the step on, a refusal that would be recorded (a second dispatch
    // while attempt 1 is in flight is evidence, SPEC §3), and a batch: each needs a write.
    expectUnavailable(await submit(h, [bigVerification(verificationId)]));
    expectUnavailable(await submit(h, [fact('AttemptDispatched', { attempt: 2, input_hash: 'sha256:in-1' })]));
    expectUnavailable(
      await submit(h, [
        fact('EnvelopeRecorded', {
          attempt: 1,
          envelope: { ok: true, operation_ref: REF, commit_state: 'committed', result: { id: 'inv_9' }, verification: { checked_at: new Date().toISOString() } },
        }),
        fact('AttemptDispatched', { attempt: 2, input_hash: 'sha256:in-1' }),
      ]),
    );
    expect(tableDump(h.file)).toBe(before);

    // Reads fold the stream and need no write: they keep answering.
    const during = await h.app.inject({ method: 'GET', url: PATH });
    expect(during.statusCode).toBe(200);
    expect(JSON.parse(during.body)).toMatchObject({ status: 'dispatched', revision: 3 });

    fault.lift(h);

    const healed = await submit(h, [bigVerification(verificationId)]);
    expect(healed.statusCode).toBe(200);
    expect(JSON.parse(healed.body)).toMatchObject({ results: [{ event_id: verificationId, status: 'appended' }], state: { status: 'succeeded' } });
    const events = JSON.parse((await h.app.inject({ method: 'GET', url: `${PATH}/events` })).body).events as Array<{ revision: number; type: string }>;
    expect(events.map((event) => `${event.revision}:${event.type}`)).toEqual([
      '0:StepPlanned',
      '1:TransitionRecorded',
      '2:AttemptDispatched',
      '3:TransitionRecorded',
      '4:VerificationRecorded',
      '5:TransitionRecorded',
    ]);
  });
});
