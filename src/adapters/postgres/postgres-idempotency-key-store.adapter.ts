import type { Pool } from 'pg';
import { StoreUnavailableError } from '../../store/event-store.port';
import type { IdempotencyKeyStore, KeptAnswer } from '../../store/idempotency-key-store.port';
import { migrate, openPool, query, type PostgresOptions } from './postgres-database';

/**
 * The Idempotency-Key answers in a table of the log's PostgreSQL database, shared by every
 * instance: a retry that the load balancer sends to another instance is replayed the same. A
 * request in flight is known only to the instance that runs it (src/http/idempotency-keys.ts);
 * two instances running one key at once still write each fact once, by its event id
 * (docs/contract.md §4), and the first answer kept is the one replayed after.
 */
export class PostgresIdempotencyKeyStore implements IdempotencyKeyStore {
  private readonly pool: Pool;
  private readonly ready: Promise<void>;
  private closed = false;

  constructor(options: PostgresOptions) {
    this.pool = openPool({ ...options, maxConnections: options.maxConnections ?? 4 });
    this.ready = migrate(this.pool);
    this.ready.catch(() => undefined);
  }

  private async open(): Promise<Pool> {
    if (this.closed) throw new StoreUnavailableError('idempotency key store closed');
    await this.ready.catch(() => migrate(this.pool));
    return this.pool;
  }

  async kept(scope: string, nowMs: number): Promise<KeptAnswer | undefined> {
    const [row] = await query<KeptAnswer>(
      await this.open(),
      'SELECT fingerprint, body FROM ledger_idempotency_keys WHERE scope = $1 AND expires_ms > $2',
      [scope, nowMs],
    );
    return row;
  }

  async keep(scope: string, answer: KeptAnswer, expiresMs: number): Promise<void> {
    // The first answer kept stands while it lasts: another instance's later one does not replace it.
    await query(
      await this.open(),
      `INSERT INTO ledger_idempotency_keys (scope, fingerprint, body, expires_ms) VALUES ($1, $2, $3, $4)
       ON CONFLICT (scope) DO UPDATE SET fingerprint = excluded.fingerprint, body = excluded.body,
         expires_ms = excluded.expires_ms
       WHERE ledger_idempotency_keys.expires_ms <= $5`,
      [scope, answer.fingerprint, answer.body, expiresMs, Date.now()],
    );
  }

  async expire(nowMs: number): Promise<void> {
    await query(await this.open(), 'DELETE FROM ledger_idempotency_keys WHERE expires_ms <= $1', [nowMs]);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end().catch(() => undefined);
  }
}
