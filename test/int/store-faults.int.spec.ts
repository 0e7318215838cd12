/**
 * Faults of the embedded store, injected for real into the SQLite file the service writes, with
 * the built HTTP application in front of it, over a real socket:
 *
 * - a full disk: `PRAGMA max_page_count` pinned to the file's current size on the store's own
 *   connection, so the next write that needs a page fails with SQLITE_FULL;
 * - a busy database: a second better-sqlite3 connection to the same file holding the write lock
 *   (BEGIN IMMEDIATE) while the store's busy timeout (LEDGER_SQLITE_BUSY_TIMEOUT_MS) runs out;
 * - a read-only database: `PRAGMA query_only` on the store's connection (SQLITE_READONLY). chmod
 *   would not do: CI runs as root, for whom file modes do not stop writes, and an open file keeps
 *   the access it was opened with anyway.
 *
 * The first and the last hold per connection, so the service runs in a child process that keeps
 * hold of the very better-sqlite3 connection its store opens (the driver's constructor is wrapped
 * there, before the store is loaded) and takes PRAGMAs over IPC; everything else is the
 * application exactly as main.js builds it. The lock needs no seam, so it is also shown on the
 * served process itself (`node dist/src/main.js`).
 *
 * Each fault must answer 503 STORE_UNAVAILABLE with Retry-After, leave the events table exactly as
 * it was (compared row by row, bytes and all), keep reads working, and heal without a restart once
 * lifted: the very same submit (same event ids) is then appended, not a duplicate, which proves
 * nothing of the failed attempt was stored.
 */
import Database from 'better-sqlite3';
import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { isErrorCode } from '@recovery-ledger/core';
import { fact } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';

const DIST = resolve(__dirname, '../../dist/src');
const REF = 'run_faults/step_1';
const PATH = `/v1/operations/${encodeURIComponent(REF)}`;

/**
 * The child: main.js's wiring, with the store opened by hand so its PRAGMAs can be reached. The
 * driver module the store loads is swapped in the require cache for a constructor that records
 * each connection it opens; the connection opened by SqliteEventStore.open is the store's own.
 */
const CHILD = `
const driverPath = require.resolve('better-sqlite3', { paths: [${JSON.stringify(DIST)}] });
const Database = require(driverPath);
const opened = [];
function RecordedDatabase(...args) {
  const connection = new Database(...args);
  opened.push(connection);
  return connection;
}
RecordedDatabase.prototype = Database.prototype;
Object.setPrototypeOf(RecordedDatabase, Database);
require.cache[driverPath].exports = RecordedDatabase;
const { createApp } = require(${JSON.stringify(join(DIST, 'app.js'))});
const { loadConfig } = require(${JSON.stringify(join(DIST, 'config/ledger-config.js'))});
const { SqliteEventStore } = require(${JSON.stringify(join(DIST, 'adapters/sqlite/sqlite-event-store.adapter.js'))});
(async () => {
  const config = loadConfig(process.env);
  const before = opened.length;
  const store = SqliteEventStore.open({
    file: config.eventsFile,
    groupCommit: config.groupCommit,
    busyTimeoutMs: config.sqliteBusyTimeoutMs,
  });
  const connections = opened.slice(before);
  if (connections.length !== 1) throw new Error('expected the store to open one connection, saw ' + connections.length);
  const pragma = (statement) => connections[0].pragma(statement);
  const app = await createApp({ config, store });
  await app.listen({ port: 0, host: '127.0.0.1' });
  process.on('message', (message) => {
    if (message.close) return void app.close().then(() => process.exit(0));
    try {
      process.send({ id: message.id, result: pragma(message.pragma) });
    } catch (error) {
      process.send({ id: message.id, error: String(error) });
    }
  });
  process.send({ port: app.getHttpServer().address().port });
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
`;

interface Harness {
  baseUrl: string;
  file: string;
  dir: string;
  pragma(statement: string): Promise<unknown>;
  close(): Promise<void>;
}

async function startChild(): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-store-faults-'));
  const script = join(dir, 'faulty-ledger.js');
  writeFileSync(script, CHILD);
  const child: ChildProcess = fork(script, [], {
    // A busy timeout of 50 ms: a real wait on the lock, short enough that the test never sits on
    // the 5 s default. No assertion depends on it.
    env: {
      ...process.env,
      LEDGER_DATA_DIR: join(dir, 'data'),
      LOG_LEVEL: 'silent',
      LEDGER_SQLITE_BUSY_TIMEOUT_MS: '50',
    },
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk) => (stderr += chunk));
  const port = await new Promise<number>((resolvePort, reject) => {
    child.once('message', (message: any) => resolvePort(message.port));
    child.once('exit', (code) => reject(new Error(`the ledger child exited with ${code}:\n${stderr}`)));
  });
  let nextId = 0;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    file: join(dir, 'data', 'events.sqlite'),
    dir,
    pragma: (statement) =>
      new Promise((resolveResult, reject) => {
        const id = ++nextId;
        const onMessage = (message: any) => {
          if (message.id !== id) return;
          child.off('message', onMessage);
          if (message.error) reject(new Error(message.error));
          else resolveResult(message.result);
        };
        child.on('message', onMessage);
        child.send({ id, pragma: statement });
      }),
    close: async () => {
      const exited = new Promise((resolveExit) => child.once('exit', resolveExit));
      child.send({ close: true });
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

async function send(baseUrl: string, method: string, path: string, body?: unknown): Promise<Answer> {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

const submit = (baseUrl: string, events: unknown[]) => send(baseUrl, 'POST', `${PATH}/events`, { events });

/** Every byte of every row, through a connection of its own (read-only: it takes no lock). */
function tableDump(file: string): string {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return JSON.stringify(
      db
        .prepare('SELECT position, stream, revision, event_id, type, data, metadata FROM events ORDER BY position')
        .all(),
    );
  } finally {
    db.close();
  }
}

/** A verification the dispatched step accepts, made large enough to need new pages of the file. */
const bigVerification = (id?: string) =>
  fact(
    'VerificationRecorded',
    {
      outcome: 'found_committed',
      checked_at: new Date().toISOString(),
      evidence_ref: 'inv_9',
      result: { receipt: 'r'.repeat(40_000) },
    },
    id,
  );

function expectUnavailable(answer: Answer): void {
  expect(answer.status).toBe(503);
  expect(answer.headers.get('content-type') ?? '').toMatch(/^application\/problem\+json/);
  const body = JSON.parse(answer.text);
  expect(body.code).toBe('STORE_UNAVAILABLE');
  expect(isErrorCode(body.code)).toBe(true);
  const retryAfter = Number(answer.headers.get('retry-after'));
  expect(Number.isInteger(retryAfter) && retryAfter > 0).toBe(true);
  expect(body.retry_after_seconds).toBe(retryAfter);
  // No driver text, file name or stack in the answer.
  expect(answer.text).not.toMatch(/sqlite|no such savepoint|\.js:\d+/i);
}

async function planAndDispatch(baseUrl: string): Promise<void> {
  expect(
    (
      await submit(baseUrl, [
        fact('StepPlanned', {
          run_id: 'run_faults',
          tool: 'create_invoice',
          side_effect: 'write',
          input_hash: 'sha256:in-1',
        }),
      ])
    ).status,
  ).toBe(200);
  expect((await submit(baseUrl, [fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:in-1' })])).status).toBe(
    200,
  );
}

/** A batch: the envelope of attempt 1 (large, so it needs pages of its own), then a dispatch. */
const batch = () => [
  fact('EnvelopeRecorded', {
    attempt: 1,
    envelope: {
      ok: true,
      operation_ref: REF,
      commit_state: 'committed',
      result: { pdf: 'p'.repeat(40_000) },
      verification: { checked_at: new Date().toISOString() },
    },
  }),
  fact('AttemptDispatched', { attempt: 2, input_hash: 'sha256:in-1' }),
];

/** A second dispatch while attempt 1 is in flight: refused, and the refusal is evidence to record (docs/contract.md §3). */
const recordedRefusal = () => [fact('AttemptDispatched', { attempt: 2, input_hash: 'sha256:in-1' })];

/**
 * What every fault must leave true: a typed 503 for each kind of write (a fact that moves the step
 * on, a batch, and where the fault stops every write a refusal that would be recorded), the table
 * untouched, reads served; then, once lifted, the very same submit appended.
 */
async function proveFault(
  baseUrl: string,
  file: string,
  inject: () => Promise<void>,
  lift: () => Promise<void>,
  { everyWrite }: { everyWrite: boolean },
): Promise<void> {
  await planAndDispatch(baseUrl);
  const before = tableDump(file);
  const verificationId = randomUUID();
  await inject();

  expectUnavailable(await submit(baseUrl, [bigVerification(verificationId)]));
  expectUnavailable(await submit(baseUrl, batch()));
  if (everyWrite) expectUnavailable(await submit(baseUrl, recordedRefusal()));
  expect(tableDump(file)).toBe(before);

  // Reads fold the stream and need no write: they keep answering.
  const during = await send(baseUrl, 'GET', PATH);
  expect(during.status).toBe(200);
  expect(JSON.parse(during.text)).toMatchObject({ status: 'dispatched', revision: 3 });

  await lift();

  const healed = await submit(baseUrl, [bigVerification(verificationId)]);
  expect(healed.status).toBe(200);
  expect(JSON.parse(healed.text)).toMatchObject({
    results: [{ event_id: verificationId, status: 'appended' }],
    state: { status: 'succeeded' },
  });
  const events = JSON.parse((await send(baseUrl, 'GET', `${PATH}/events`)).text).events as Array<{
    revision: number;
    type: string;
  }>;
  expect(events.map((event) => `${event.revision}:${event.type}`)).toEqual([
    '0:StepPlanned',
    '1:TransitionRecorded',
    '2:AttemptDispatched',
    '3:TransitionRecorded',
    '4:VerificationRecorded',
    '5:TransitionRecorded',
  ]);
}

/** Another process's writer: takes the file's write lock and keeps it until released. */
function holdWriteLock(file: string): () => void {
  const holder = new Database(file, { timeout: 0 });
  holder.exec('BEGIN IMMEDIATE');
  return () => {
    holder.exec('ROLLBACK');
    holder.close();
  };
}

describe('store faults behind the HTTP application', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await startChild();
  });
  afterEach(async () => {
    await h.close();
  });

  it('a full disk (SQLITE_FULL via max_page_count): 503 STORE_UNAVAILABLE, nothing stored, heals when space returns', async () => {
    await proveFault(
      h.baseUrl,
      h.file,
      async () => {
        const [{ page_count }] = (await h.pragma('page_count')) as Array<{ page_count: number }>;
        await h.pragma(`max_page_count = ${page_count}`);
      },
      async () => {
        await h.pragma('max_page_count = 1073741823');
      },
      // A row that still fits in a page the file already has is written, as on a disk with a few
      // bytes left; a refusal record is that small, so only writes that need new pages are shown.
      { everyWrite: false },
    );
  });

  it('a read-only database (SQLITE_READONLY via query_only): 503 STORE_UNAVAILABLE, nothing stored, heals when writable', async () => {
    await proveFault(
      h.baseUrl,
      h.file,
      async () => {
        await h.pragma('query_only = 1');
      },
      async () => {
        await h.pragma('query_only = 0');
      },
      { everyWrite: true },
    );
  });

  it('another connection holding the write lock (SQLITE_BUSY): 503 STORE_UNAVAILABLE, nothing stored, heals when released', async () => {
    let release: (() => void) | undefined;
    await proveFault(
      h.baseUrl,
      h.file,
      async () => {
        release = holdWriteLock(h.file);
      },
      async () => {
        release?.();
      },
      { everyWrite: true },
    );
  });
});

describe('the served process (dist/src/main.js) under a held write lock', () => {
  let ledger: LedgerProcess;
  afterEach(async () => {
    await ledger.stop();
    ledger.cleanup();
  });

  it('answers 503 after LEDGER_SQLITE_BUSY_TIMEOUT_MS and appends once the lock is released', async () => {
    ledger = await startLedger({
      env: { LEDGER_SQLITE_BUSY_TIMEOUT_MS: '50', LEDGER_RATE_LIMIT_PER_MINUTE: '10000000' },
    });
    let release: (() => void) | undefined;
    await proveFault(
      ledger.baseUrl,
      join(ledger.dataDir, 'events.sqlite'),
      async () => {
        release = holdWriteLock(join(ledger.dataDir, 'events.sqlite'));
      },
      async () => {
        release?.();
      },
      { everyWrite: true },
    );
  });
});
