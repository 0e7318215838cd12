import type { Pool, PoolClient } from 'pg';
import { StoreUnavailableError } from '../../store/event-store.port';
import {
  leaseOperations,
  type AcquireRequest,
  type AcquireResult,
  type LeaseRecord,
  type LeaseStore,
} from '../../store/lease-store.port';
import { inTransaction, migrate, openPool, query, type PostgresOptions } from './postgres-database';

/**
 * Leases in a table of the log's PostgreSQL database, shared by every instance that connects to it.
 * Every change reads, decides and writes in one transaction holding a transaction-scoped advisory
 * lock on the item's key, so two instances changing one item serialise there (the compare-and-set
 * the port asks for) while changes to other items go on side by side. As in the SQLite adapter,
 * leases are not facts: losing the table frees every item, it loses no decision.
 */
export class PostgresLeaseStore implements LeaseStore {
  private readonly pool: Pool;
  private readonly ready: Promise<void>;
  private closed = false;

  constructor(options: PostgresOptions) {
    this.pool = openPool(options);
    this.ready = migrate(this.pool);
    this.ready.catch(() => undefined);
  }

  private async open(): Promise<Pool> {
    if (this.closed) throw new StoreUnavailableError('lease store closed');
    await this.ready.catch(() => migrate(this.pool));
    return this.pool;
  }

  private async change<T>(
    key: string,
    decide: (current: LeaseRecord | undefined) => { write?: LeaseRecord; answer: T },
  ): Promise<T> {
    return inTransaction(await this.open(), async (client: PoolClient) => {
      await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`lease:${key}`]);
      const { rows } = await client.query<{ record: string }>('SELECT record FROM ledger_leases WHERE key = $1', [key]);
      const current = rows[0] ? (JSON.parse(rows[0].record) as LeaseRecord) : undefined;
      const { write, answer } = decide(current);
      if (write) {
        await client.query(
          `INSERT INTO ledger_leases (key, expires_at_ms, record) VALUES ($1, $2, $3)
           ON CONFLICT (key) DO UPDATE SET expires_at_ms = excluded.expires_at_ms, record = excluded.record`,
          [key, write.expires_at_ms, JSON.stringify(write)],
        );
      }
      return answer;
    });
  }

  private readonly operations = leaseOperations((key, decide) => this.change(key, decide));

  acquire(request: AcquireRequest): Promise<AcquireResult> {
    return this.operations.acquire(request);
  }

  renew(key: string, leaseId: string, nowMs: number, ttlMs: number): Promise<LeaseRecord | undefined> {
    return this.operations.renew(key, leaseId, nowMs, ttlMs);
  }

  release(key: string, leaseId: string, nowMs: number, holdMs?: number): Promise<boolean> {
    return this.operations.release(key, leaseId, nowMs, holdMs);
  }

  async getMany(keys: readonly string[]): Promise<Map<string, LeaseRecord>> {
    const found = new Map<string, LeaseRecord>();
    if (keys.length === 0) return found;
    const rows = await query<{ key: string; record: string }>(
      await this.open(),
      'SELECT key, record FROM ledger_leases WHERE key = ANY($1::text[])',
      [[...keys]],
    );
    for (const row of rows) found.set(row.key, JSON.parse(row.record) as LeaseRecord);
    return found;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end().catch(() => undefined);
  }
}
