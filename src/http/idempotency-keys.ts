import Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalJson, LedgerProblem } from '@recovery-ledger/core';
import type { IdempotencyKeyStore, KeptAnswer } from '../store/idempotency-key-store.port';
import type { Caller } from './caller';

/**
 * The Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header, docs/contract.md §4 for the
 * ledger's own idempotency it sits on). A key is scoped to the tenant and the API key that sent it.
 * Its fingerprint is the method, the route and the body, canonical: the same key with the same
 * fingerprint is answered with the first 2xx answer, replayed; with another fingerprint, 422
 * IDEMPOTENCY_KEY_REUSED; while the first request with it is still being processed, 409
 * IDEMPOTENCY_KEY_IN_FLIGHT. Only 2xx answers are kept: a refused request is decided again on a
 * retry, and the ledger's event ids answer a resubmitted fact as the first time anyway, so the
 * header never changes what is written, only what a reused key is told.
 */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
/** Published expiry (the draft asks for one): a key is remembered this long after its first answer. */
export const IDEMPOTENCY_KEY_TTL_MS = 24 * 3_600_000;
const KEY_MAX = 255;

/**
 * The key of the header: an sf-string (`"…"`, RFC 8941 §3.3.3) as the draft defines it, or, as
 * Stripe-style clients send it, the bare text; 1 to 255 printable ASCII characters either way.
 */
export function parseIdempotencyKey(raw: string | string[] | undefined): string | undefined {
  if (raw === undefined) return undefined;
  if (Array.isArray(raw)) throw badKey('Idempotency-Key must be sent once');
  const text = raw.trim();
  const quoted = /^"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"$/.exec(text);
  if (!quoted && text.startsWith('"')) throw badKey('Idempotency-Key starts as an sf-string ("…") and is not one');
  const key = quoted ? quoted[1].replace(/\\(["\\])/g, '$1') : text;
  if (key.length === 0 || key.length > KEY_MAX || !/^[\x20-\x7e]+$/.test(key)) {
    throw badKey(
      `Idempotency-Key must be a string of 1 to ${KEY_MAX} printable ASCII characters, as "…" (an sf-string) or bare`,
    );
  }
  return key;
}

function badKey(detail: string): LedgerProblem {
  return new LedgerProblem('BAD_REQUEST', detail, { field: 'Idempotency-Key' });
}

/** The answers in a SQLite file of the instance's data directory (the embedded store's default). */
export class SqliteIdempotencyKeyStore implements IdempotencyKeyStore {
  private readonly db: Database.Database;
  /** Prepared once: preparing a statement per request was a measurable part of a submit's CPU. */
  private readonly statements: {
    kept: Database.Statement;
    keep: Database.Statement;
    expire: Database.Statement;
  };

  constructor(dataDir: string) {
    mkdirSync(dataDir, { recursive: true });
    this.db = new Database(join(dataDir, 'idempotency-keys.sqlite'), { timeout: 5000 });
    this.db.pragma('journal_mode = WAL');
    this.db.exec(`CREATE TABLE IF NOT EXISTS idempotency_keys (
      scope TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, status INTEGER NOT NULL, body TEXT NOT NULL, expires_ms INTEGER NOT NULL
    )`);
    this.statements = {
      kept: this.db.prepare('SELECT fingerprint, body FROM idempotency_keys WHERE scope = ? AND expires_ms > ?'),
      keep: this.db.prepare(
        'INSERT OR REPLACE INTO idempotency_keys (scope, fingerprint, status, body, expires_ms) VALUES (?, ?, 200, ?, ?)',
      ),
      expire: this.db.prepare('DELETE FROM idempotency_keys WHERE expires_ms <= ?'),
    };
  }

  async kept(scope: string, nowMs: number): Promise<KeptAnswer | undefined> {
    return this.statements.kept.get(scope, nowMs) as KeptAnswer | undefined;
  }

  async keep(scope: string, answer: KeptAnswer, expiresMs: number): Promise<void> {
    this.statements.keep.run(scope, answer.fingerprint, answer.body, expiresMs);
  }

  async expire(nowMs: number): Promise<void> {
    this.statements.expire.run(nowMs);
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}

/**
 * Provided by the HTTP module: over a SQLite file of LEDGER_DATA_DIR, or the PostgreSQL store's
 * table when the log is there. Closed in the last shutdown phase, after the HTTP server has
 * answered every request it took: Nest runs onModuleDestroy before it stops the server, and a
 * submit still in flight then found the file closed (500, though its events were stored).
 */
export class IdempotencyKeys {
  private readonly store: IdempotencyKeyStore;
  /** Keys being processed by this instance now. */
  private readonly inFlight = new Set<string>();
  private stored = 0;

  /** A data directory (the SQLite file in it) or a store. */
  constructor(where: string | IdempotencyKeyStore) {
    this.store = typeof where === 'string' ? new SqliteIdempotencyKeyStore(where) : where;
  }

  /**
   * Runs `handle` once per key: a kept answer is replayed (`replayed` true), another body under the
   * key or a request already running with it is refused.
   */
  async run(
    caller: Caller,
    key: string,
    request: { method: string; route: string; body: unknown },
    handle: () => Promise<unknown>,
  ): Promise<{ answer: unknown; replayed: boolean }> {
    // Hashed: the table holds no client key as sent, and the scope cannot be forged across tenants.
    const scope = createHash('sha256').update(`${caller.tenant}\n${caller.actor}\n${key}`).digest('hex');
    const fingerprint = createHash('sha256')
      .update(`${request.method} ${request.route}\n${canonicalJson(request.body ?? null)}`)
      .digest('hex');
    // Claimed before the store is read (which may wait on a connection): two requests with one key
    // arriving together are told apart here, in one turn of the event loop.
    if (this.inFlight.has(scope)) {
      throw new LedgerProblem(
        'IDEMPOTENCY_KEY_IN_FLIGHT',
        'a request with this Idempotency-Key is still being processed: retry once it is answered',
      );
    }
    this.inFlight.add(scope);
    try {
      const kept = await this.store.kept(scope, Date.now());
      if (kept) {
        if (kept.fingerprint !== fingerprint) {
          throw new LedgerProblem(
            'IDEMPOTENCY_KEY_REUSED',
            'this Idempotency-Key was used for another request: send a new key for a new request',
          );
        }
        return { answer: JSON.parse(kept.body) as unknown, replayed: true };
      }
      const answer = await handle();
      await this.store.keep(scope, { fingerprint, body: JSON.stringify(answer) }, Date.now() + IDEMPOTENCY_KEY_TTL_MS);
      if (++this.stored % 1000 === 0) await this.store.expire(Date.now());
      return { answer, replayed: false };
    } finally {
      this.inFlight.delete(scope);
    }
  }

  async onApplicationShutdown(): Promise<void> {
    await this.store.close();
  }
}
