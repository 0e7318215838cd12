import { Client, Pool, type PoolClient } from 'pg';
import { POSTGRES_QUERY_TIMEOUT_MS } from '../../config/ledger-config';
import { RevisionConflictError, StoreUnavailableError } from '../../store/event-store.port';

/**
 * The recorded hash of the event row `alias`, as SQL: read from the stored metadata text (written by
 * JSON.stringify, so `"hash":"…"` follows a `{` or a `,`, never inside `"prev_hash"`; the last such
 * key, which the top-level one is, the ledger writing it after every other).
 */
export const STORED_HASH = (alias: string) => `substring(${alias}.metadata from '^.*[{,]"hash":"([0-9a-f]{64})"')`;

/**
 * The tables every PostgreSQL adapter uses, created on start. Each statement is idempotent and the
 * whole runs under one advisory lock, so instances starting together neither race nor fail.
 *
 * `ledger_events.position` is the transaction id of the append (xid8, as a number) times 2^16 plus
 * the event's index in it: see postgres-event-store.adapter.ts for why a sequence would not do.
 * Event bodies are kept as the text the ledger wrote (not jsonb, which reorders keys), so what is
 * read back is byte for byte what was hashed.
 */
const MIGRATIONS = [
  `CREATE TABLE IF NOT EXISTS ledger_events (
    position       bigint  PRIMARY KEY,
    transaction_id xid8    NOT NULL,
    stream         text    NOT NULL,
    revision       integer NOT NULL,
    event_id       text    NOT NULL,
    type           text    NOT NULL,
    data           text    NOT NULL,
    metadata       text    NOT NULL,
    UNIQUE (stream, revision)
  )`,
  `CREATE TABLE IF NOT EXISTS ledger_streams (
    stream   text    PRIMARY KEY,
    revision integer NOT NULL
  )`,
  // The log anchor: the log chain up to a position below the high-water mark, moved forward by
  // whoever reads it (postgres-event-store.adapter.ts, logAnchor).
  `CREATE TABLE IF NOT EXISTS ledger_log_anchor (
    id        integer PRIMARY KEY CHECK (id = 1),
    position  bigint  NOT NULL,
    events    bigint  NOT NULL,
    log_hash  text    NOT NULL,
    signature text
  )`,
  // Each stream's anchored head (docs/postgres.md, "Integrity"), moved by the append's own
  // statement. Once, when the columns are added (a new database, or one of the version before
  // heads were kept): each head is its stream's stored last event (read with a pattern, not a
  // cast, so a row that is not JSON does not stop the start: verify names it; a stream with no
  // last event gets an empty head, which matches none), and the anchor starts from the empty log,
  // to be moved over the log as it stands. Never again: an anchor removed later is not started
  // afresh, so its removal is seen. The catalog is asked first: ALTER TABLE and CREATE INDEX lock
  // the table even when there is nothing to do, and every start would hold up the appends.
  `DO $$ BEGIN
     IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                     WHERE table_schema = current_schema() AND table_name = 'ledger_streams' AND column_name = 'head_hash') THEN
       ALTER TABLE ledger_streams ADD COLUMN head_hash text, ADD COLUMN head_position bigint;
       UPDATE ledger_streams s SET head_hash = ${STORED_HASH('e')}, head_position = e.position
         FROM ledger_events e
        WHERE e.stream = s.stream AND e.revision = s.revision;
       UPDATE ledger_streams SET head_hash = '', head_position = 0 WHERE head_hash IS NULL;
       -- The heads in bytewise name order (what the whole-log audit merges them in), a page at a time.
       CREATE INDEX IF NOT EXISTS ledger_streams_bytewise ON ledger_streams (stream COLLATE "C");
       INSERT INTO ledger_log_anchor (id, position, events, log_hash) VALUES (1, 0, 0, repeat('0', 64))
         ON CONFLICT (id) DO NOTHING;
     END IF;
   END $$`,
  // States the ledger folded, kept beside their stream by the append that reached them or by a
  // reader (postgres-event-store.adapter.ts): a cache of the log, checked against it when read.
  `CREATE TABLE IF NOT EXISTS ledger_snapshots (
    stream       text    NOT NULL,
    fold_version text    NOT NULL,
    revision     integer NOT NULL,
    hash         text    NOT NULL,
    state        text    NOT NULL,
    PRIMARY KEY (stream, fold_version, revision)
  )`,
  `CREATE TABLE IF NOT EXISTS ledger_leases (
    key           text   PRIMARY KEY,
    expires_at_ms bigint NOT NULL,
    record        text   NOT NULL
  )`,
  `CREATE TABLE IF NOT EXISTS ledger_clock_bases (
    boot_id text   PRIMARY KEY,
    wall_ms bigint NOT NULL,
    record  text   NOT NULL
  )`,
  `CREATE TABLE IF NOT EXISTS ledger_idempotency_keys (
    scope       text   PRIMARY KEY,
    fingerprint text   NOT NULL,
    body        text   NOT NULL,
    expires_ms  bigint NOT NULL
  )`,
  `CREATE TABLE IF NOT EXISTS ledger_clock_heartbeats (
    instance_id text   PRIMARY KEY,
    ledger_ms   bigint NOT NULL,
    record      text   NOT NULL
  )`,
  // The shared read models (postgres-read-model.adapter.ts): documents as the projector stored them,
  // each row stamped with the number of the publication that last wrote it.
  `CREATE TABLE IF NOT EXISTS ledger_read_model_state (
    id     integer PRIMARY KEY CHECK (id = 1),
    change bigint  NOT NULL
  )`,
  `INSERT INTO ledger_read_model_state (id, change) VALUES (1, 0) ON CONFLICT (id) DO NOTHING`,
  `CREATE TABLE IF NOT EXISTS ledger_read_model_checkpoints (
    projection  text    PRIMARY KEY,
    version     integer NOT NULL,
    position    bigint  NOT NULL,
    recorded_at text,
    resets      integer NOT NULL DEFAULT 0,
    change      bigint  NOT NULL
  )`,
  `CREATE TABLE IF NOT EXISTS ledger_read_model_docs (
    projection text   NOT NULL,
    key        text   NOT NULL,
    doc        text   NOT NULL,
    change     bigint NOT NULL,
    PRIMARY KEY (projection, key)
  )`,
  `CREATE INDEX IF NOT EXISTS ledger_read_model_docs_change ON ledger_read_model_docs (change)`,
  `CREATE TABLE IF NOT EXISTS ledger_read_model_links (
    projection text   NOT NULL,
    stream     text   NOT NULL,
    link       text   NOT NULL,
    change     bigint NOT NULL,
    PRIMARY KEY (projection, stream)
  )`,
  `CREATE INDEX IF NOT EXISTS ledger_read_model_links_change ON ledger_read_model_links (change)`,
  // The webhook subscriptions, outbox and consumer checkpoint (postgres-webhook-store.adapter.ts).
  // `seq` orders the outbox for listing only: no follower reads "after seq N", so a sequence's
  // commit order does not matter here. `claimed_until_ms` is a sender's hold on a row it is posting.
  `CREATE TABLE IF NOT EXISTS ledger_webhook_subscriptions (
    id                    text    PRIMARY KEY,
    tenant                text    NOT NULL,
    url                   text    NOT NULL,
    secret                text    NOT NULL,
    kinds                 text    NOT NULL,
    unknown_after_ms      bigint  NOT NULL,
    premature_refusals    integer NOT NULL,
    created_at            text    NOT NULL,
    created_position      bigint  NOT NULL,
    active                boolean NOT NULL,
    previous_secret       text,
    previous_secret_until text,
    disabled_reason       text,
    disabled_at           text
  )`,
  `CREATE INDEX IF NOT EXISTS ledger_webhook_subscriptions_tenant ON ledger_webhook_subscriptions (tenant)`,
  `CREATE TABLE IF NOT EXISTS ledger_webhook_deliveries (
    id               text    PRIMARY KEY,
    subscription_id  text    NOT NULL,
    tenant           text    NOT NULL,
    kind             text    NOT NULL,
    operation_ref    text    NOT NULL,
    body             text    NOT NULL,
    status           text    NOT NULL,
    attempts         integer NOT NULL,
    next_attempt_ms  bigint  NOT NULL,
    last_status      integer,
    last_error       text,
    created_at       text    NOT NULL,
    delivered_at     text,
    seq              bigint  GENERATED ALWAYS AS IDENTITY,
    claimed_until_ms bigint  NOT NULL DEFAULT 0
  )`,
  `CREATE INDEX IF NOT EXISTS ledger_webhook_deliveries_due ON ledger_webhook_deliveries (status, next_attempt_ms)`,
  `CREATE INDEX IF NOT EXISTS ledger_webhook_deliveries_tenant ON ledger_webhook_deliveries (tenant, seq)`,
  `CREATE TABLE IF NOT EXISTS ledger_webhook_watches (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    subscription_id     text   NOT NULL,
    tenant              text   NOT NULL,
    operation_ref       text   NOT NULL,
    transition_event_id text   NOT NULL,
    since               text   NOT NULL,
    due_ms              bigint NOT NULL,
    UNIQUE (subscription_id, transition_event_id)
  )`,
  `CREATE INDEX IF NOT EXISTS ledger_webhook_watches_due ON ledger_webhook_watches (due_ms)`,
  `CREATE TABLE IF NOT EXISTS ledger_webhook_premature (
    tenant        text    NOT NULL,
    operation_ref text    NOT NULL,
    count         integer NOT NULL,
    PRIMARY KEY (tenant, operation_ref)
  )`,
  `CREATE TABLE IF NOT EXISTS ledger_webhook_checkpoint (
    id       integer PRIMARY KEY CHECK (id = 1),
    position bigint  NOT NULL
  )`,
  `INSERT INTO ledger_webhook_checkpoint (id, position) VALUES (1, 0) ON CONFLICT (id) DO NOTHING`,
];

/** Keys of the advisory locks the adapters take (one number space per database). */
export const ADVISORY_LOCKS = {
  migrations: 4_712_001,
  timeBase: 4_712_002,
  projector: 4_712_003,
  webhookConsumer: 4_712_004,
} as const;

export interface PostgresOptions {
  /** `postgres://user:password@host:port/database` (DATABASE_URL). */
  connectionString: string;
  /** Connections this adapter's pool may open (pg's default is 10). */
  maxConnections?: number;
  /** How long a request waits for a connection before the store is called unavailable. */
  connectTimeoutMs?: number;
  /** How long the server lets a transaction of this pool sit idle before it ends the session. */
  idleInTransactionTimeoutMs?: number;
  /**
   * How long a statement may go unanswered before its connection is given up and the request
   * answered as unavailable: a connection whose peer fell silent (a cut link) is not noticed by
   * TCP for hours, and a request on it would wait as long (LEDGER_POSTGRES_QUERY_TIMEOUT_MS,
   * default POSTGRES_QUERY_TIMEOUT_MS).
   */
  queryTimeoutMs?: number;
}

/**
 * Server-side TCP keep-alives for the adapters' sessions: a session whose client is cut off without
 * a reset (a link gone silent) is ended by the server after about 5 + 3 × 2 s of silence, not the
 * system's two hours, and with it its transaction and its advisory locks (the projector's, the
 * webhook consumer's: docs/postgres.md, "Faults"). Keep-alives probe only a connection with nothing
 * unacknowledged: one whose last answer was still on its way when the link fell silent is left to
 * retransmissions (about 15 minutes by the system's default), so the same 11 s also bounds how long
 * sent data may stay unacknowledged (`tcp_user_timeout`).
 */
export const SERVER_KEEPALIVES =
  '-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3 -c tcp_user_timeout=11000';

export function openPool(options: PostgresOptions): Pool {
  const pool = new Pool({
    connectionString: options.connectionString,
    max: options.maxConnections ?? 10,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000,
    application_name: 'recovery-ledger',
    // An instance cut off mid-transaction would hold every follower of the log below its
    // transaction id (the high-water mark, postgres-event-store.adapter.ts) until the server
    // noticed: keep-alives let it notice, and no transaction of these adapters idles for seconds.
    keepAlive: true,
    options: SERVER_KEEPALIVES,
    idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs ?? 10_000,
    query_timeout: options.queryTimeoutMs ?? POSTGRES_QUERY_TIMEOUT_MS,
  });
  // An idle connection the server dropped (a restart, a network cut) is an 'error' on the pool:
  // without a listener it would end the process; the next request opens a new one.
  pool.on('error', () => undefined);
  return pool;
}

/**
 * A session kept outside the pool for an election (the projector's, the webhook consumer's), opened:
 * the advisory lock lives and ends with it, so it takes the pool's keep-alives and idle-transaction
 * bound (docs/postgres.md, "Faults"), and no query timeout, since it waits on nothing but its own
 * short statements. `lose` is told once, with why, when the session fails or ends (the server ended
 * it, the link was reset, the caller ended it), or when it cannot be opened, which then throws the
 * port's error; the session is ended either way, so its lock goes with it.
 */
export async function electionClient(
  options: PostgresOptions,
  applicationName: string,
  lose: (error: Error) => void,
): Promise<Client> {
  const client = new Client({
    connectionString: options.connectionString,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000,
    application_name: applicationName,
    keepAlive: true,
    options: SERVER_KEEPALIVES,
    idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs ?? 10_000,
  });
  let lost = false;
  const end = (error: Error) => {
    if (lost) return;
    lost = true;
    client.end().catch(() => undefined);
    lose(error);
  };
  client.on('error', end);
  client.on('end', () => end(new Error(`the session ${applicationName} ended`)));
  try {
    await client.connect();
  } catch (error) {
    end(error instanceof Error ? error : new Error(String(error)));
    throw toPortError(error);
  }
  return client;
}

const migrated = new WeakMap<Pool, Promise<void>>();

/** Creates the tables once per pool (idempotent across pools and instances). */
export function migrate(pool: Pool): Promise<void> {
  let done = migrated.get(pool);
  if (!done) {
    done = inTransaction(pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [ADVISORY_LOCKS.migrations]);
      for (const statement of MIGRATIONS) await client.query(statement);
    });
    // A failed start is tried again on the next request, not remembered.
    done.catch(() => migrated.delete(pool));
    migrated.set(pool, done);
  }
  return done;
}

/** Runs `work` in one transaction on one connection: COMMIT when it resolves, ROLLBACK when it throws. */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  let client: PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw toPortError(error);
  }
  let broken: unknown;
  // A connection the server dropped while it was checked out (a restart, a cut) emits 'error'
  // outside any query: kept here, so it neither ends the process nor goes back to the pool.
  const onError = (error: Error) => (broken = error);
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    // A statement that went unanswered leaves the connection busy with it: a ROLLBACK would wait
    // behind it as long again. The connection is destroyed instead; the server rolls back.
    if (isQueryTimeout(error)) broken = error;
    else await client.query('ROLLBACK').catch((rollbackError: unknown) => (broken = rollbackError));
    throw toPortError(error);
  } finally {
    client.off('error', onError);
    // A connection whose rollback failed is in an unknown state: destroyed, not reused.
    client.release(broken instanceof Error ? broken : undefined);
  }
}

/** pg's error for a statement unanswered within `query_timeout`. */
function isQueryTimeout(error: unknown): error is Error {
  return error instanceof Error && error.message === 'Query read timeout';
}

/** One statement on any connection of the pool, its error mapped to the port's. */
export async function query<Row>(pool: Pool, text: string, values: unknown[] = []): Promise<Row[]> {
  try {
    return (await pool.query(text, values)).rows as Row[];
  } catch (error) {
    throw toPortError(error);
  }
}

/**
 * SQLSTATE classes and codes that mean "the store cannot take this now", not "the request was
 * wrong": connection exceptions (08), the server shutting down or starting (57P01–57P03), out of
 * resources (53), a serialization failure or deadlock (40001, 40P01), which a retry resolves, and
 * a session the server ended for idling in a transaction or idling at all (25P03, 57P05): the
 * transaction was rolled back, what it wrote was not stored (a cut link, docs/postgres.md, "Faults").
 */
const UNAVAILABLE = [/^08/, /^57P0[1-3]$/, /^57P05$/, /^25P03$/, /^53/, /^40001$/, /^40P01$/];
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH']);
const NETWORK_MESSAGES =
  /Connection terminated|connection error|timeout exceeded when trying to connect|Cannot use a pool after calling end|not queryable|Query read timeout/i;

/** The one place a driver error becomes the port's error; driver types never cross the port. */
export function toPortError(error: unknown, stream?: string, expectedRevision?: number): Error {
  if (error instanceof RevisionConflictError || error instanceof StoreUnavailableError) return error;
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string') {
    if (code === '23505' && stream !== undefined && expectedRevision !== undefined) {
      return new RevisionConflictError(stream, expectedRevision, undefined);
    }
    if (UNAVAILABLE.some((pattern) => pattern.test(code))) return new StoreUnavailableError(`postgres ${code}`, 1);
    if (NETWORK_CODES.has(code)) return new StoreUnavailableError(code.toLowerCase(), 2);
  }
  if (error instanceof Error && NETWORK_MESSAGES.test(error.message)) {
    return new StoreUnavailableError(error.message, 2);
  }
  return error instanceof Error ? error : new Error(String(error));
}
