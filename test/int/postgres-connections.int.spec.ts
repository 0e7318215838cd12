/**
 * The adapters' connections when the link to PostgreSQL fails without a reset (docs/postgres.md,
 * "Faults"): a statement left unanswered is given up after the query timeout and answered as
 * unavailability (a 503), its connection not reused; a transaction the server ended for idling is
 * unavailability too, not an unexpected error; and the server is asked to probe the sessions'
 * connections every few seconds, so a silent client's session and advisory locks end in seconds.
 * The query timeout is a setting (LEDGER_POSTGRES_QUERY_TIMEOUT_MS) that reaches the adapters the
 * service opens.
 */
import { Client } from 'pg';
import { inTransaction, openPool, query } from '../../src/adapters/postgres/postgres-database';
import { openSharedIdempotencyKeyStore } from '../../src/adapters/store.factory';
import { loadConfig } from '../../src/config/ledger-config';
import { StoreUnavailableError } from '../../src/store/event-store.port';
import { describeWithPostgres } from '../support/postgres';
import { startTcpProxy } from '../support/tcp-proxy';
import { until } from '../support/until';

describeWithPostgres('PostgreSQL connections of the adapters', (database) => {
  it('gives up a statement left unanswered as unavailability, and does not reuse its connection', async () => {
    // pg_sleep stands for a server that no longer answers: the statement is never answered in time.
    const pool = openPool({ connectionString: database().url, queryTimeoutMs: 200, maxConnections: 1 });
    try {
      const stuck = inTransaction(pool, async (client) => {
        const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        await client.query('SELECT pg_sleep(30)');
        return rows[0].pid;
      });
      await expect(stuck).rejects.toBeInstanceOf(StoreUnavailableError);
      // The one connection of the pool was destroyed, not handed out busy: the next statement is answered.
      expect(await query<{ one: number }>(pool, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);
    } finally {
      await pool.end();
    }
  });

  it('answers a transaction the server ended for idling, while the link was silent, as unavailability', async () => {
    // The client reaches the server through a proxy that falls silent: its next statement is held
    // on the way, the server sees the transaction idle and ends it, and when the link comes back the
    // statement's answer is the server's FATAL (25P03), not a result.
    const proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(database().url).port) });
    const pool = openPool({ connectionString: proxy.through(database().url), idleInTransactionTimeoutMs: 200 });
    const watcher = new Client({ connectionString: database().url });
    await watcher.connect();
    try {
      let pid = 0;
      let sent!: () => void;
      const held = new Promise<void>((resolve) => (sent = resolve));
      const ended = inTransaction(pool, async (client) => {
        pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
        proxy.silence();
        const statement = client.query('SELECT 1');
        sent();
        await statement;
      });
      ended.catch(() => undefined);
      await held;
      await until(
        async () => (await watcher.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).rowCount,
        (count) => count === 0,
        'the server to end the idle transaction',
      );
      await proxy.restore();
      await expect(ended).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      await watcher.end();
      await pool.end();
      await proxy.close();
    }
  });

  it("asks the server to probe every session's connection after seconds of silence, and to give up data left unacknowledged as long", async () => {
    const pool = openPool({ connectionString: database().url });
    try {
      const [settings] = await query<Record<string, string>>(
        pool,
        `SELECT current_setting('tcp_keepalives_idle') AS idle, current_setting('tcp_keepalives_interval') AS interval,
                current_setting('tcp_keepalives_count') AS count, current_setting('tcp_user_timeout') AS user_timeout`,
      );
      expect(settings).toEqual({ idle: '5', interval: '2', count: '3', user_timeout: '11000' });
    } finally {
      await pool.end();
    }
  });

  it('gives a statement up after LEDGER_POSTGRES_QUERY_TIMEOUT_MS, in the adapters the service opens from its settings', async () => {
    const settings = (timeout: string) =>
      loadConfig({ LEDGER_STORE: 'postgres', DATABASE_URL: database().url, LEDGER_POSTGRES_QUERY_TIMEOUT_MS: timeout });
    // Opened as the service opens them: by the factory, from the configuration.
    const patient = await openSharedIdempotencyKeyStore(settings('600000'));
    const hasty = await openSharedIdempotencyKeyStore(settings('1000'));
    const blocker = new Client({ connectionString: database().url });
    await blocker.connect();
    try {
      if (!patient || !hasty) throw new Error('the factory opened no PostgreSQL store');
      // Both migrated first, so that only the lock below holds their statements.
      await patient.kept('warm-up', 0);
      await hasty.kept('warm-up', 0);
      // A transaction holding the table stands for a statement the server does not answer.
      await blocker.query('BEGIN');
      await blocker.query('LOCK TABLE ledger_idempotency_keys IN ACCESS EXCLUSIVE MODE');
      const states: Record<string, string> = { patient: 'waiting', hasty: 'waiting' };
      const follow = (name: string, asked: Promise<unknown>) =>
        asked.then(
          () => (states[name] = 'answered'),
          (error: unknown) => (states[name] = error instanceof StoreUnavailableError ? 'unavailable' : String(error)),
        );
      // The patient store asks first and is seen waiting on the lock before the hasty one asks: had
      // both the same timeout, the patient one would be given up first.
      const patientDone = follow('patient', patient.kept('held', 0));
      await until(
        async () =>
          (
            await blocker.query(
              "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%ledger_idempotency_keys%'",
            )
          ).rowCount,
        (count) => count === 1,
        'the patient store to wait on the lock',
      );
      await follow('hasty', hasty.kept('held', 0));
      expect(states).toEqual({ patient: 'waiting', hasty: 'unavailable' });
      await blocker.query('ROLLBACK');
      await patientDone;
      expect(states).toEqual({ patient: 'answered', hasty: 'unavailable' });
      // The hasty store's connection was given up, not its pool: it answers once the table is free.
      expect(await hasty.kept('held', 0)).toBeUndefined();
    } finally {
      await blocker.end();
      await patient?.close();
      await hasty?.close();
    }
  });
});
