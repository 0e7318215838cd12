/**
 * The campaign's checker on PostgreSQL (docs/postgres.md): the log is `ledger_events`, read on
 * connections of the checker's own, never through a service; the shared read models are the
 * `ledger_read_model_*` tables the projector publishes to (docs/postgres.md, "Read models").
 *
 * Every row is read, not only those below the followers' high-water mark: the checker reads once
 * the load has ended, and a row the mark would still hold back is a row a follower may not skip.
 */
import Database from 'better-sqlite3';
import { Client } from 'pg';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { PostgresEventStore } from '../../src/adapters/postgres/postgres-event-store.adapter';
import type { EventRow } from '../support/scenario';
import { rawLogOf, rebuildProjectionsFrom, type CheckReport, type LogSource } from './checker';
import { countTrust, postgresTrustSql } from './trust-count';

async function withClient<T>(url: string, use: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url, application_name: 'recovery-ledger-chaos-checker' });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The log in the database at `url`, as the checker reads it. */
export function postgresLog(url: string): LogSource {
  return {
    read: () =>
      withClient(url, async (client) => {
        const { rows } = await client.query<Omit<EventRow, 'position'> & { position: string }>(
          'SELECT position, stream, revision, event_id, type, data, metadata FROM ledger_events ORDER BY position',
        );
        return rawLogOf(rows.map((row) => ({ ...row, position: Number(row.position) })));
      }),
    count: () =>
      withClient(url, async (client) =>
        Number((await client.query<{ n: string }>('SELECT count(*) AS n FROM ledger_events')).rows[0].n),
      ),
    head: () =>
      withClient(url, async (client) =>
        Number(
          (await client.query<{ head: string }>('SELECT coalesce(max(position), 0) AS head FROM ledger_events')).rows[0]
            .head,
        ),
      ),
    countTrust: (tenant) => withClient(url, (client) => countTrust(postgresTrustSql(client), tenant)),
    rebuild: () => rebuildProjectionsFrom(new PostgresEventStore({ connectionString: url })),
  };
}

/** The change number of the last publication of the shared read models (0 before the first). */
export function lastPublication(url: string): Promise<number> {
  return withClient(url, async (client) => {
    const { rows } = await client.query<{ change: string }>('SELECT change FROM ledger_read_model_state WHERE id = 1');
    return Number(rows[0]?.change ?? 0);
  }).catch(() => 0);
}

/**
 * The shared read models every instance serves (what the projectors published, whoever they
 * were) against every projection rebuilt from zero: each document, each stream link and each
 * checkpoint, both ways. Run once the projector has caught up with the log and the load has ended.
 */
export async function checkSharedRebuild(rebuiltFile: string, url: string, report: CheckReport): Promise<void> {
  const outcome = report.rebuild_equals_live;
  const rebuilt = new Database(rebuiltFile, { readonly: true, fileMustExist: true });
  try {
    await withClient(url, async (client) => {
      const compare = (what: string, live: Map<string, string>, fromZero: Map<string, string>) => {
        outcome.checked += fromZero.size;
        for (const [key, value] of fromZero) {
          const other = live.get(key);
          if (other === undefined) outcome.failures.push(`${what} ${key}: in the rebuild only`);
          else if (other !== value)
            outcome.failures.push(`${what} ${key}: live ${other.slice(0, 400)} / rebuilt ${value.slice(0, 400)}`);
        }
        for (const key of live.keys())
          if (!fromZero.has(key)) outcome.failures.push(`${what} ${key}: in the shared read model only`);
      };
      const pairs = (rows: Array<{ k: string; v: string }>) => new Map(rows.map((row) => [row.k, row.v]));
      for (const { name } of LEDGER_PROJECTIONS) {
        const live = async (table: 'docs' | 'links') =>
          pairs(
            (
              await client.query<{ k: string; v: string }>(
                table === 'docs'
                  ? 'SELECT key AS k, doc AS v FROM ledger_read_model_docs WHERE projection = $1'
                  : 'SELECT stream AS k, link AS v FROM ledger_read_model_links WHERE projection = $1',
                [name],
              )
            ).rows,
          );
        const fromZero = (sql: string) => pairs(rebuilt.prepare(sql).all() as Array<{ k: string; v: string }>);
        compare(`${name} document`, await live('docs'), fromZero(`SELECT key AS k, doc AS v FROM rm_${name}`));
        compare(`${name} link`, await live('links'), fromZero(`SELECT stream AS k, link AS v FROM rm_${name}_links`));
      }
      const checkpoint = (row: { projection: string; version: unknown; position: unknown; recorded_at: unknown }) =>
        JSON.stringify([Number(row.version), Number(row.position), row.recorded_at ?? null]);
      type CheckpointRow = { projection: string; version: unknown; position: unknown; recorded_at: unknown };
      const liveCheckpoints = (
        await client.query<CheckpointRow>(
          'SELECT projection, version, position, recorded_at FROM ledger_read_model_checkpoints',
        )
      ).rows;
      const rebuiltCheckpoints = rebuilt
        .prepare('SELECT projection, version, position, recorded_at FROM projection_checkpoints')
        .all() as CheckpointRow[];
      compare(
        'checkpoint',
        new Map(liveCheckpoints.map((row) => [row.projection, checkpoint(row)])),
        new Map(rebuiltCheckpoints.map((row) => [row.projection, checkpoint(row)])),
      );
    });
  } finally {
    rebuilt.close();
  }
}
