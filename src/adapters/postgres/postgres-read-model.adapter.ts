import type { Client } from 'pg';
import type {
  ProjectorLease,
  PublishedChanges,
  ReadModelChanges,
  SharedReadModelStore,
} from '../../store/shared-read-model.port';
import {
  ADVISORY_LOCKS,
  query,
  migrate,
  openPool,
  electionClient,
  toPortError,
  type PostgresOptions,
} from './postgres-database';
import { Notifier } from './postgres-notifier';

const NOTIFY_CHANNEL = 'ledger_read_models';

/**
 * The read models shared through PostgreSQL (docs/postgres.md, "Read models"). The projector is
 * whoever holds `pg_try_advisory_lock` on a session of its own; every publication is a transaction
 * on that same session, so when the session ends (the process killed, the host cut off and the
 * server's keep-alive giving up) the lock and any publication in flight end together, and the next
 * projector starts from what was committed.
 *
 * Every publication takes the next change number from the one-row state table (the row lock
 * orders publications by commit), and stamps each row it writes with it: a follower that has read
 * up to change N reads `change > N` and misses nothing, since no publication numbered below N can
 * commit after one numbered N (unlike a sequence, docs/postgres.md, "Appends and positions").
 */
export class PostgresSharedReadModelStore implements SharedReadModelStore {
  private readonly pool;
  private readonly notifier: Notifier;
  private readonly listeners = new Set<() => void>();
  private following = false;
  private closed = false;

  constructor(private readonly options: PostgresOptions) {
    this.pool = openPool({ maxConnections: 2, ...options });
    this.notifier = new Notifier(options, NOTIFY_CHANNEL);
  }

  /**
   * The session an instance that does not project tries for the lock on, kept between tries so a
   * try each second costs a statement, not a new connection (a backend) each time.
   */
  private candidate: ProjectorSession | undefined;

  private async session(): Promise<ProjectorSession> {
    if (this.candidate && !this.candidate.lost) return this.candidate;
    const client = electionClient(this.options, 'recovery-ledger-election');
    const session: ProjectorSession = { client, lost: undefined, listeners: [] };
    const lose = (error: Error) => {
      if (session.lost) return;
      session.lost = error;
      if (this.candidate === session) this.candidate = undefined;
      client.end().catch(() => undefined);
      for (const listener of session.listeners) listener(error);
    };
    client.on('error', (error) => lose(error));
    client.on('end', () => lose(new Error('the projector session ended')));
    try {
      await client.connect();
    } catch (error) {
      lose(error instanceof Error ? error : new Error(String(error)));
      throw toPortError(error);
    }
    this.candidate = session;
    return session;
  }

  async tryLead(): Promise<ProjectorLease | undefined> {
    await migrate(this.pool);
    if (this.closed) return undefined;
    const session = await this.session();
    const { client } = session;
    try {
      const { rows } = await client.query<{ held: boolean }>('SELECT pg_try_advisory_lock($1) AS held', [
        ADVISORY_LOCKS.projector,
      ]);
      if (!rows[0]?.held) return undefined;
      // Which session projects, as pg_stat_activity shows it to an operator.
      await client.query("SET application_name = 'recovery-ledger-projector'");
    } catch (error) {
      await client.end().catch(() => undefined);
      throw toPortError(error);
    }
    // The lease owns the session now: it ends with the lease.
    this.candidate = undefined;
    return {
      versions: async () => {
        const { rows } = await client.query<{ projection: string; version: number }>(
          'SELECT projection, version FROM ledger_read_model_checkpoints',
        );
        return Object.fromEntries(rows.map((row) => [row.projection, row.version]));
      },
      publish: (changes) => publishOn(client, changes),
      onLost: (listener) => {
        if (session.lost) listener(session.lost);
        else session.listeners.push(listener);
      },
      release: async () => {
        session.lost ??= new Error('released');
        await client.end().catch(() => undefined);
      },
    };
  }

  async pull(after: number): Promise<PublishedChanges> {
    await migrate(this.pool);
    // One statement, so one snapshot for every table (and one round trip): the rows and the change
    // number they reach agree.
    const rows = await query<{
      kind: 's' | 'c' | 'd' | 'l';
      projection: string | null;
      a: string | null;
      b: string | null;
      n: string | null;
      m: string | null;
      r: number | null;
    }>(
      this.pool,
      `SELECT 's' AS kind, NULL::text AS projection, NULL::text AS a, NULL::text AS b, change::text AS n,
              NULL::text AS m, NULL::integer AS r
         FROM ledger_read_model_state WHERE id = 1
       UNION ALL
       SELECT 'c', projection, recorded_at, version::text, position::text, change::text, resets
         FROM ledger_read_model_checkpoints
       UNION ALL
       SELECT 'd', projection, key, doc, NULL, NULL, NULL FROM ledger_read_model_docs WHERE change > $1
       UNION ALL
       SELECT 'l', projection, stream, link, NULL, NULL, NULL FROM ledger_read_model_links WHERE change > $1`,
      [after],
    );
    const pulled: PublishedChanges = { change: 0, resetCounts: {}, resets: [], docs: [], links: [], checkpoints: [] };
    for (const row of rows) {
      const projection = row.projection as string;
      if (row.kind === 's') pulled.change = Number(row.n);
      else if (row.kind === 'd') pulled.docs.push({ projection, key: row.a as string, doc: row.b as string });
      else if (row.kind === 'l') pulled.links.push({ projection, stream: row.a as string, link: row.b as string });
      else {
        pulled.resetCounts[projection] = row.r ?? 0;
        if (Number(row.m) > after)
          pulled.checkpoints.push({
            projection,
            version: Number(row.b),
            position: Number(row.n),
            recordedAt: row.a,
          });
      }
    }
    return pulled;
  }

  onPublished(listener: () => void): () => void {
    this.listeners.add(listener);
    if (!this.following) {
      this.following = true;
      void this.follow();
    }
    return () => this.listeners.delete(listener);
  }

  /** Wakes the listeners on each notification (the notifier reconnects by itself after a drop). */
  private async follow(): Promise<void> {
    while (!this.closed) {
      await this.notifier.wait(60_000, () => this.closed);
      if (this.closed) return;
      for (const listener of this.listeners) listener();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.notifier.close();
    await this.candidate?.client.end().catch(() => undefined);
    await this.pool.end().catch(() => undefined);
  }
}

interface ProjectorSession {
  client: Client;
  /** Why the session ended, once it has. */
  lost: Error | undefined;
  listeners: Array<(error: Error) => void>;
}

/** One publication on the projector's own session: every row and the new change number, then a notification. */
async function publishOn(client: Client, changes: ReadModelChanges): Promise<number> {
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ change: string }>(
      'UPDATE ledger_read_model_state SET change = change + 1 WHERE id = 1 RETURNING change',
    );
    const change = Number(rows[0].change);
    for (const projection of changes.resets) {
      await client.query('DELETE FROM ledger_read_model_docs WHERE projection = $1', [projection]);
      await client.query('DELETE FROM ledger_read_model_links WHERE projection = $1', [projection]);
      await client.query(
        `INSERT INTO ledger_read_model_checkpoints (projection, version, position, recorded_at, resets, change)
         VALUES ($1, 0, 0, NULL, 1, $2)
         ON CONFLICT (projection) DO UPDATE SET position = 0, recorded_at = NULL,
           resets = ledger_read_model_checkpoints.resets + 1, change = $2`,
        [projection, change],
      );
    }
    if (changes.docs.length > 0) {
      await client.query(
        `INSERT INTO ledger_read_model_docs (projection, key, doc, change)
         SELECT projection, key, doc, $4 FROM unnest($1::text[], $2::text[], $3::text[]) AS t(projection, key, doc)
         ON CONFLICT (projection, key) DO UPDATE SET doc = excluded.doc, change = excluded.change`,
        [
          changes.docs.map((row) => row.projection),
          changes.docs.map((row) => row.key),
          changes.docs.map((row) => row.doc),
          change,
        ],
      );
    }
    if (changes.links.length > 0) {
      await client.query(
        `INSERT INTO ledger_read_model_links (projection, stream, link, change)
         SELECT projection, stream, link, $4 FROM unnest($1::text[], $2::text[], $3::text[]) AS t(projection, stream, link)
         ON CONFLICT (projection, stream) DO UPDATE SET link = excluded.link, change = excluded.change`,
        [
          changes.links.map((row) => row.projection),
          changes.links.map((row) => row.stream),
          changes.links.map((row) => row.link),
          change,
        ],
      );
    }
    if (changes.checkpoints.length > 0) {
      await client.query(
        `INSERT INTO ledger_read_model_checkpoints (projection, version, position, recorded_at, change)
         SELECT projection, version, position, recorded_at, $5
           FROM unnest($1::text[], $2::integer[], $3::bigint[], $4::text[]) AS t(projection, version, position, recorded_at)
         ON CONFLICT (projection) DO UPDATE SET version = excluded.version, position = excluded.position,
           recorded_at = excluded.recorded_at, change = excluded.change`,
        [
          changes.checkpoints.map((row) => row.projection),
          changes.checkpoints.map((row) => row.version),
          changes.checkpoints.map((row) => row.position),
          changes.checkpoints.map((row) => row.recordedAt),
          change,
        ],
      );
    }
    await client.query('COMMIT');
    // Announced after COMMIT, not in the transaction: a notifying transaction holds PostgreSQL's
    // cluster-wide notification lock from before its commit until the commit is flushed, and every
    // other notifying commit of the cluster waits on it (docs/postgres.md, "Measured"). Not awaited:
    // the publication stands once committed, the session sends it before its next statement, and a
    // lost one costs the copies their 500 ms poll, never a publication (they read `change > N`).
    client.query(`SELECT pg_notify('${NOTIFY_CHANNEL}', $1)`, [String(change)]).catch(() => undefined);
    return change;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw toPortError(error);
  }
}
