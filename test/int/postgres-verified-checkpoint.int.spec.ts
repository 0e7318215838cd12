/**
 * The start-up check from the last verified checkpoint on PostgreSQL (docs/reliability.md,
 * "Start-up without a full pass"; docs/postgres.md, "Integrity"): an instance that verified the
 * shared log up to a point refuses, before it serves anything, a database rolled back below that
 * point (restored from an earlier copy), a tail cut, and an event of the tail edited; and it reads
 * only what follows its checkpoint to say so (counted, never timed). The service runs in process
 * on real databases: each case on a copy of one seeded database (CREATE DATABASE … TEMPLATE, the
 * server's own copy of the files), with the instance's data directory holding its checkpoint.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { verifiedCheckpointFile } from '../../src/integrity/verified-checkpoint';
import { operationStream } from '../../src/store/stream-names';
import { ledgerAt, request } from '../support/http';
import { startLedgerInProcess, type InProcessLedger } from '../support/ledger-in-process';
import { describeWithPostgres } from '../support/postgres';
import { ok, operation, uniqueRef } from '../support/scenario';
import { until } from '../support/until';

const TENANT = 'default'; // local mode

interface Integrity {
  state?: string;
  audit?: { state?: string };
  start_check?: { state: string };
}

/** The events the start-up check read (`ledger_integrity_start_check_events_read`). */
async function startCheckRead(baseUrl: string): Promise<number> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const found = /^ledger_integrity_start_check_events_read (\d+)/m.exec(text);
  if (!found) throw new Error('no ledger_integrity_start_check_events_read in /metrics');
  return Number(found[1]);
}

async function readiness(baseUrl: string): Promise<{ status: number; integrity: Integrity }> {
  const answer = await request(baseUrl, 'GET', '/health/ready');
  const body = answer.body as { details?: { integrity?: Integrity } };
  return { status: answer.status, integrity: body.details?.integrity ?? {} };
}

async function withClient<T>(url: string, work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

describeWithPostgres('the verified checkpoint on PostgreSQL', (database) => {
  const dirs: string[] = [];
  const started: InProcessLedger[] = [];
  const urlOf = (name: string) => {
    const url = new URL(database().adminUrl);
    url.pathname = `/${name}`;
    return url.toString();
  };
  const nameOf = (url: string) => new URL(url).pathname.slice(1);
  let copies = 0;

  /** A copy of a database made by the server (as a restore of its files would be), under a new name. */
  async function copyOf(url: string): Promise<string> {
    const name = `${nameOf(url)}_c${++copies}`;
    await withClient(database().adminUrl, async (admin) => {
      // A template must have no session: the stopped instances' pools may still be closing.
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [nameOf(url)]);
      await admin.query(`CREATE DATABASE ${name} TEMPLATE ${nameOf(url)}`);
    });
    return urlOf(name);
  }

  async function start(url: string, dataDir: string): Promise<InProcessLedger> {
    const ledger = await startLedgerInProcess({ dataDir, env: { LEDGER_STORE: 'postgres', DATABASE_URL: url } });
    started.push(ledger);
    return ledger;
  }

  async function stop(ledger: InProcessLedger): Promise<void> {
    await ledger.stop();
    started.splice(started.indexOf(ledger), 1);
  }

  async function writeOperations(ledger: InProcessLedger, count: number, label: string): Promise<string[]> {
    const refs: string[] = [];
    for (let n = 0; n < count; n++) {
      const op = operation(ledgerAt(ledger.baseUrl), uniqueRef(label));
      ok(await op.plan());
      ok(await op.dispatch(1));
      refs.push(op.ref);
    }
    return refs;
  }

  /** A fresh data directory holding only the given checkpoint (what the instance kept beside its data). */
  function dataDirWith(checkpoint: string): string {
    const dir = mkdtempSync(join(tmpdir(), 'ledger-pg-checkpoint-'));
    dirs.push(dir);
    writeFileSync(verifiedCheckpointFile(dir), checkpoint);
    return dir;
  }

  // The seeded log: the first part verified by a whole-log audit and a checkpoint taken there
  // (`early`); then a tail appended after it and verified at a clean stop (`atHead`).
  let seeded: string;
  let backup: string;
  let early: string;
  let atHead: string;
  let tail: string[];
  let total: number;
  /** Events appended after `early`, and the streams they continue. */
  let appended: { events: number; streams: number };

  beforeAll(async () => {
    seeded = database().url;
    const dir = mkdtempSync(join(tmpdir(), 'ledger-pg-seed-'));
    dirs.push(dir);
    const first = await start(seeded, dir);
    await writeOperations(first, 8, 'ck-early');
    await until(
      () => readiness(first.baseUrl),
      ({ integrity }) => integrity.audit?.state === 'verified',
      'the whole-log audit behind the first start',
      60_000,
    );
    await stop(first);
    early = readFileSync(verifiedCheckpointFile(dir), 'utf8');
    backup = await copyOf(seeded);

    const second = await start(seeded, dir);
    tail = await writeOperations(second, 4, 'ck-tail');
    await stop(second);
    atHead = readFileSync(verifiedCheckpointFile(dir), 'utf8');
    await withClient(seeded, async (client) => {
      total = Number((await client.query<{ n: string }>('SELECT count(*) AS n FROM ledger_events')).rows[0].n);
      const { rows } = await client.query<{ events: string; streams: string }>(
        'SELECT count(*) AS events, count(DISTINCT stream) AS streams FROM ledger_events WHERE position > $1',
        [JSON.parse(early).position],
      );
      appended = { events: Number(rows[0].events), streams: Number(rows[0].streams) };
    });
  }, 180_000);

  afterAll(async () => {
    for (const ledger of started.splice(0)) await ledger.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('verifies at start only what was appended after the checkpoint, and serves', async () => {
    expect(JSON.parse(atHead).position).toBeGreaterThan(JSON.parse(early).position);
    const url = await copyOf(seeded);
    const ledger = await start(url, dataDirWith(early));
    const { integrity } = await readiness(ledger.baseUrl);
    expect(integrity.start_check?.state).toBe('verified');
    // The tail and the event at the checkpoint, and at most one event before each stream the tail
    // continues: not the log before the checkpoint.
    const read = await startCheckRead(ledger.baseUrl);
    expect(read).toBeGreaterThanOrEqual(appended.events + 1);
    expect(read).toBeLessThanOrEqual(appended.events + 1 + appended.streams);
    expect(total - appended.events).toBeGreaterThan(appended.streams + 1);
    const ready = await until(
      () => readiness(ledger.baseUrl),
      ({ status }) => status === 200,
      'readiness after a clean start-up check',
      60_000,
    );
    expect(ready.integrity.state).not.toBe('broken');
    await stop(ledger);
  });

  const refusedAtStart = async (url: string, checkpoint: string, ref: string) => {
    const ledger = await start(url, dataDirWith(checkpoint));
    // The check ran before the server listened: the first answer already says it.
    const { status, integrity } = await readiness(ledger.baseUrl);
    expect(integrity.start_check?.state).toBe('broken');
    expect(await startCheckRead(ledger.baseUrl)).toBeLessThan(total);
    expect(status).toBe(503);
    expect(integrity.state).toBe('broken');
    const read = await request(ledger.baseUrl, 'GET', `/v1/operations/${encodeURIComponent(ref)}`);
    expect({ status: read.status, code: (read.body as { code?: string }).code }).toEqual({
      status: 500,
      code: 'HISTORY_INTEGRITY_FAILED',
    });
    await stop(ledger);
  };

  it('refuses a database restored from a copy older than what the instance verified', async () => {
    const url = await copyOf(backup);
    await refusedAtStart(url, atHead, tail[0]);
  });

  it("refuses a log whose tail was cut: a stream's last events deleted", async () => {
    const url = await copyOf(seeded);
    await withClient(url, (client) =>
      client.query('DELETE FROM ledger_events WHERE stream = $1 AND revision > 0', [operationStream(TENANT, tail[1])]),
    );
    await refusedAtStart(url, early, tail[1]);
  });

  it('refuses a log whose last operation was removed whole, its stream row with it', async () => {
    const url = await copyOf(seeded);
    const stream = operationStream(TENANT, tail[3]);
    await withClient(url, async (client) => {
      await client.query('DELETE FROM ledger_events WHERE stream = $1', [stream]);
      await client.query('DELETE FROM ledger_streams WHERE stream = $1', [stream]);
    });
    await refusedAtStart(url, early, tail[0]);
  });

  it('refuses a log with an event of the tail edited', async () => {
    const url = await copyOf(seeded);
    await withClient(url, (client) =>
      client.query(
        `UPDATE ledger_events SET data = jsonb_set(data::jsonb, '{attempt}', '7')::text WHERE stream = $1 AND revision = 1`,
        [operationStream(TENANT, tail[2])],
      ),
    );
    await refusedAtStart(url, early, tail[2]);
  });
});
