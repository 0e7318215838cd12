import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { NotificationKind } from '../../webhooks/notification-rules';
import { openSecret, SecretBox, sealSecrets, type SecretsAtRest } from '../../webhooks/webhook-secret-box';
import type {
  ConsumedBatch,
  Delivery,
  DeliveryCounts,
  DeliveryStatus,
  NewDelivery,
  Subscription,
  UnknownWatch,
  WebhookStore,
} from '../../webhooks/webhook-store.port';

export { deliveryId, webhookFile } from '../../webhooks/webhook-store.port';
export type { SecretsAtRest } from '../../webhooks/webhook-secret-box';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS webhook_subscriptions (
  id TEXT PRIMARY KEY, tenant TEXT NOT NULL, url TEXT NOT NULL, secret TEXT NOT NULL, kinds TEXT NOT NULL,
  unknown_after_ms INTEGER NOT NULL, premature_refusals INTEGER NOT NULL, created_at TEXT NOT NULL,
  created_position INTEGER NOT NULL, active INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS webhook_deliveries (
  id TEXT PRIMARY KEY, subscription_id TEXT NOT NULL, tenant TEXT NOT NULL, kind TEXT NOT NULL,
  operation_ref TEXT NOT NULL, body TEXT NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL,
  next_attempt_ms INTEGER NOT NULL, last_status INTEGER, last_error TEXT, created_at TEXT NOT NULL, delivered_at TEXT,
  seq INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (status, next_attempt_ms);
CREATE INDEX IF NOT EXISTS webhook_deliveries_tenant ON webhook_deliveries (tenant, seq);
CREATE TABLE IF NOT EXISTS webhook_watches (
  id INTEGER PRIMARY KEY AUTOINCREMENT, subscription_id TEXT NOT NULL, tenant TEXT NOT NULL, operation_ref TEXT NOT NULL,
  transition_event_id TEXT NOT NULL, since TEXT NOT NULL, due_ms INTEGER NOT NULL,
  UNIQUE (subscription_id, transition_event_id)
);
CREATE INDEX IF NOT EXISTS webhook_watches_due ON webhook_watches (due_ms);
CREATE TABLE IF NOT EXISTS webhook_premature (
  tenant TEXT NOT NULL, operation_ref TEXT NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (tenant, operation_ref)
);
CREATE TABLE IF NOT EXISTS webhook_checkpoint (id INTEGER PRIMARY KEY CHECK (id = 1), position INTEGER NOT NULL);
INSERT OR IGNORE INTO webhook_checkpoint (id, position) VALUES (1, 0);
`;

/** Columns added after the first release of the file: added in place at start when missing. */
const ADDED_SUBSCRIPTION_COLUMNS = [
  'previous_secret TEXT',
  'previous_secret_until TEXT',
  'disabled_reason TEXT',
  'disabled_at TEXT',
];

interface SubscriptionRow extends Omit<
  Subscription,
  'kinds' | 'active' | 'previous_secret' | 'previous_secret_until' | 'disabled_reason' | 'disabled_at'
> {
  kinds: string;
  active: number;
  previous_secret: string | null;
  previous_secret_until: string | null;
  disabled_reason: string | null;
  disabled_at: string | null;
}

interface DeliveryRow extends Omit<Delivery, 'last_status' | 'last_error' | 'delivered_at'> {
  last_status: number | null;
  last_error: string | null;
  delivered_at: string | null;
}

export interface SqliteWebhookStoreOptions {
  /** LEDGER_WEBHOOK_SECRET_KEY: signing secrets are stored wrapped with it (webhook-secret-box.ts). */
  secretKey?: Buffer;
}

function deliveryOf(row: DeliveryRow): Delivery {
  const { last_status, last_error, delivered_at, ...rest } = row;
  return {
    ...rest,
    ...(last_status === null ? {} : { last_status }),
    ...(last_error === null ? {} : { last_error }),
    ...(delivered_at === null ? {} : { delivered_at }),
  };
}

/**
 * The webhook store on SQLite (`<LEDGER_DATA_DIR>/webhooks.sqlite`), WAL with synchronous=FULL:
 * unlike the read models this file cannot be rebuilt from the log (it holds the subscriptions and
 * what was already delivered), so a commit is durable before it is relied on.
 */
export class SqliteWebhookStore implements WebhookStore {
  private readonly db: Database.Database;
  private seq: number;
  private readonly prepared = new Map<string, Database.Statement>();
  private readonly box: SecretBox | undefined;
  readonly secretsAtRest: SecretsAtRest;

  constructor(
    private readonly file: string,
    options: SqliteWebhookStoreOptions = {},
  ) {
    if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
    this.db = new Database(file, { timeout: 5000 });
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.exec(SCHEMA);
    const columns = new Set(
      (this.db.prepare('PRAGMA table_info(webhook_subscriptions)').all() as Array<{ name: string }>).map(
        (column) => column.name,
      ),
    );
    for (const column of ADDED_SUBSCRIPTION_COLUMNS) {
      if (!columns.has(column.split(' ')[0])) this.db.exec(`ALTER TABLE webhook_subscriptions ADD COLUMN ${column}`);
    }
    this.seq = (
      this.statement('SELECT COALESCE(MAX(seq), 0) AS seq FROM webhook_deliveries').get() as { seq: number }
    ).seq;
    this.box = options.secretKey ? new SecretBox(options.secretKey) : undefined;
    try {
      this.secretsAtRest = this.sealSecrets();
    } catch (error) {
      this.db.close();
      throw error;
    }
  }

  /** At start: plain secrets wrapped when there is a key, a refusal to start when they cannot be used (sealSecrets). */
  private sealSecrets(): SecretsAtRest {
    const { atRest, toWrap } = sealSecrets(
      this.db.prepare('SELECT id, secret, previous_secret FROM webhook_subscriptions').all() as Array<{
        id: string;
        secret: string;
        previous_secret: string | null;
      }>,
      this.box,
      this.file,
    );
    if (toWrap.length > 0) {
      // secure_delete zeroes what the update frees, and the truncating checkpoint drops the WAL frames
      // that held the old rows, so no plain secret is left in either file.
      this.db.pragma('secure_delete = ON');
      const update = {
        secret: this.db.prepare('UPDATE webhook_subscriptions SET secret = ? WHERE id = ?'),
        previous_secret: this.db.prepare('UPDATE webhook_subscriptions SET previous_secret = ? WHERE id = ?'),
      };
      this.db.transaction(() => {
        for (const row of toWrap) update[row.column].run(row.wrapped, row.id);
      })();
      this.db.pragma('wal_checkpoint(TRUNCATE)');
    }
    return atRest;
  }

  private subscriptionOf(row: SubscriptionRow): Subscription {
    const open = (stored: string) => openSecret(stored, row.id, this.box);
    const { previous_secret, previous_secret_until, disabled_reason, disabled_at, ...rest } = row;
    return {
      ...rest,
      secret: open(row.secret),
      kinds: JSON.parse(row.kinds) as NotificationKind[],
      active: row.active === 1,
      ...(previous_secret && previous_secret_until
        ? { previous_secret: open(previous_secret), previous_secret_until }
        : {}),
      ...(disabled_reason && disabled_at ? { disabled_reason, disabled_at } : {}),
    };
  }

  async addSubscription(subscription: Subscription): Promise<void> {
    const {
      previous_secret: _previous,
      previous_secret_until: _until,
      disabled_reason: _reason,
      disabled_at: _at,
      ...row
    } = subscription;
    this.statement(
      `INSERT INTO webhook_subscriptions (id, tenant, url, secret, kinds, unknown_after_ms, premature_refusals, created_at, created_position, active)
         VALUES (@id, @tenant, @url, @secret, @kinds, @unknown_after_ms, @premature_refusals, @created_at, @created_position, @active)`,
    ).run({
      ...row,
      secret: this.box ? this.box.wrap(subscription.secret, subscription.id) : subscription.secret,
      kinds: JSON.stringify(subscription.kinds),
      active: subscription.active ? 1 : 0,
    });
  }

  async deactivate(tenant: string, id: string): Promise<boolean> {
    // An ended subscription signs nothing more: its secret is not kept (nor a reason to keep the key).
    return (
      this.statement(
        "UPDATE webhook_subscriptions SET active = 0, secret = '', previous_secret = NULL WHERE tenant = ? AND id = ? AND active = 1",
      ).run(tenant, id).changes > 0
    );
  }

  async disable(id: string, reason: string, at: string): Promise<boolean> {
    return (
      this.statement(
        "UPDATE webhook_subscriptions SET active = 0, secret = '', previous_secret = NULL, disabled_reason = ?, disabled_at = ? WHERE id = ? AND active = 1",
      ).run(reason, at, id).changes > 0
    );
  }

  async rotateSecret(tenant: string, id: string, secret: string, previousUntil: string): Promise<boolean> {
    // The current secret, as stored (wrapped or not), becomes the previous one in the same statement.
    return (
      this.statement(
        'UPDATE webhook_subscriptions SET previous_secret = secret, previous_secret_until = ?, secret = ? WHERE tenant = ? AND id = ? AND active = 1',
      ).run(previousUntil, this.box ? this.box.wrap(secret, id) : secret, tenant, id).changes > 0
    );
  }

  async subscriptions(tenant?: string, activeOnly = true): Promise<Subscription[]> {
    const clauses = [...(tenant === undefined ? [] : ['tenant = @tenant']), ...(activeOnly ? ['active = 1'] : [])];
    const sql = `SELECT * FROM webhook_subscriptions${clauses.length ? ` WHERE ${clauses.join(' AND ')}` : ''} ORDER BY created_at, id`;
    return (this.statement(sql).all(tenant === undefined ? {} : { tenant }) as SubscriptionRow[]).map((row) =>
      this.subscriptionOf(row),
    );
  }

  /** The file is this instance's own: it is always the one consumer of the log into it. */
  async takeConsumerTurn(): Promise<boolean> {
    return true;
  }

  async checkpoint(): Promise<number> {
    return (this.statement('SELECT position FROM webhook_checkpoint WHERE id = 1').get() as { position: number })
      .position;
  }

  async commitBatch(batch: ConsumedBatch, { checkpointOnlyWithChanges = false } = {}): Promise<boolean> {
    return this.db
      .transaction(() => {
        let changes = this.insertDeliveryRows(batch.deliveries);
        const watch = this.statement(
          `INSERT OR IGNORE INTO webhook_watches (subscription_id, tenant, operation_ref, transition_event_id, since, due_ms)
           VALUES (@subscription_id, @tenant, @operation_ref, @transition_event_id, @since, @due_ms)`,
        );
        for (const row of batch.watches) changes += watch.run(row).changes;
        const reset = this.statement('DELETE FROM webhook_premature WHERE tenant = ? AND operation_ref = ?');
        for (const row of batch.resetPremature) changes += reset.run(row.tenant, row.operation_ref).changes;
        if (changes === 0 && checkpointOnlyWithChanges) return false;
        this.statement('UPDATE webhook_checkpoint SET position = ? WHERE id = 1 AND position < ?').run(
          batch.position,
          batch.position,
        );
        return true;
      })
      .immediate();
  }

  async countPremature(tenant: string, operationRef: string): Promise<number> {
    return (
      this.statement(
        `INSERT INTO webhook_premature (tenant, operation_ref, count) VALUES (?, ?, 1)
           ON CONFLICT (tenant, operation_ref) DO UPDATE SET count = count + 1 RETURNING count`,
      ).get(tenant, operationRef) as { count: number }
    ).count;
  }

  async insertDeliveries(deliveries: NewDelivery[]): Promise<void> {
    this.db.transaction(() => this.insertDeliveryRows(deliveries)).immediate();
  }

  /** Answers how many rows were new (a replayed cause's row is already there). */
  private insertDeliveryRows(deliveries: NewDelivery[]): number {
    const insert = this.statement(
      `INSERT OR IGNORE INTO webhook_deliveries (id, subscription_id, tenant, kind, operation_ref, body, status, attempts, next_attempt_ms, created_at, seq)
       VALUES (@id, @subscription_id, @tenant, @kind, @operation_ref, @body, 'pending', 0, 0, @created_at, @seq)`,
    );
    // A replayed cause has the same id: INSERT OR IGNORE keeps the first row and its progress.
    let inserted = 0;
    for (const delivery of deliveries) {
      if (insert.run({ ...delivery, seq: this.seq + 1 }).changes > 0) {
        this.seq += 1;
        inserted += 1;
      }
    }
    return inserted;
  }

  /** Each statement is compiled once: the consumer and the dispatcher run the same few all the time. */
  private statement(sql: string): Database.Statement {
    let statement = this.prepared.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.prepared.set(sql, statement);
    }
    return statement;
  }

  async dueWatches(nowMs: number, limit: number): Promise<UnknownWatch[]> {
    return this.statement('SELECT * FROM webhook_watches WHERE due_ms <= ? ORDER BY due_ms, id LIMIT ?').all(
      nowMs,
      limit,
    ) as UnknownWatch[];
  }

  async settleWatch(id: number, delivery?: NewDelivery): Promise<void> {
    this.db
      .transaction(() => {
        const ended = this.statement('DELETE FROM webhook_watches WHERE id = ?').run(id).changes > 0;
        if (ended && delivery) this.insertDeliveryRows([delivery]);
      })
      .immediate();
  }

  async dueDeliveries(nowMs: number, limit: number, perTenant?: number): Promise<Delivery[]> {
    if (perTenant === undefined) {
      return (
        this.statement(
          "SELECT * FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_ms <= ? ORDER BY next_attempt_ms, seq LIMIT ?",
        ).all(nowMs, limit) as DeliveryRow[]
      ).map(deliveryOf);
    }
    return (
      this.statement(
        `SELECT * FROM webhook_deliveries WHERE id IN (
           SELECT id FROM (
             SELECT id, ROW_NUMBER() OVER (PARTITION BY tenant ORDER BY next_attempt_ms, seq) AS tenant_rank
             FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_ms <= ?
           ) WHERE tenant_rank <= ?
         ) ORDER BY next_attempt_ms, seq LIMIT ?`,
      ).all(nowMs, perTenant, limit) as DeliveryRow[]
    ).map(deliveryOf);
  }

  /** One instance sends from this file, and it never starts a delivery already in flight: nothing to hold. */
  async claimDeliveries(ids: string[]): Promise<string[]> {
    return ids;
  }

  async nextDueMs(): Promise<number | undefined> {
    const delivery = this.statement(
      "SELECT MIN(next_attempt_ms) AS at FROM webhook_deliveries WHERE status = 'pending'",
    ).get() as { at: number | null };
    const watch = this.statement('SELECT MIN(due_ms) AS at FROM webhook_watches').get() as { at: number | null };
    const times = [delivery.at, watch.at].filter((at): at is number => at !== null);
    return times.length ? Math.min(...times) : undefined;
  }

  async markDelivered(id: string, status: number, at: string): Promise<void> {
    this.statement(
      "UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1, last_status = ?, last_error = NULL, delivered_at = ? WHERE id = ?",
    ).run(status, at, id);
  }

  async markAttemptFailed(
    id: string,
    outcome: { status?: number; error: string; nextAttemptMs?: number },
  ): Promise<void> {
    this.statement(
      `UPDATE webhook_deliveries SET attempts = attempts + 1, last_status = ?, last_error = ?,
         status = CASE WHEN ? IS NULL THEN 'failed' ELSE 'pending' END, next_attempt_ms = COALESCE(?, next_attempt_ms) WHERE id = ?`,
    ).run(
      outcome.status ?? null,
      outcome.error.slice(0, 300),
      outcome.nextAttemptMs ?? null,
      outcome.nextAttemptMs ?? null,
      id,
    );
  }

  async deliveries(tenant: string, options: { status?: DeliveryStatus; limit: number }): Promise<Delivery[]> {
    const rows = options.status
      ? this.statement(
          'SELECT * FROM webhook_deliveries WHERE tenant = ? AND status = ? ORDER BY seq DESC LIMIT ?',
        ).all(tenant, options.status, options.limit)
      : this.statement('SELECT * FROM webhook_deliveries WHERE tenant = ? ORDER BY seq DESC LIMIT ?').all(
          tenant,
          options.limit,
        );
    return (rows as DeliveryRow[]).map(deliveryOf);
  }

  async delivery(tenant: string, id: string): Promise<Delivery | undefined> {
    const row = this.statement('SELECT * FROM webhook_deliveries WHERE tenant = ? AND id = ?').get(tenant, id) as
      DeliveryRow | undefined;
    return row ? deliveryOf(row) : undefined;
  }

  async requeue(tenant: string, id: string, nowMs: number): Promise<Delivery | undefined> {
    this.statement(
      "UPDATE webhook_deliveries SET status = 'pending', next_attempt_ms = ?, delivered_at = NULL WHERE tenant = ? AND id = ?",
    ).run(nowMs, tenant, id);
    return this.delivery(tenant, id);
  }

  async counts(tenant?: string): Promise<DeliveryCounts[]> {
    const sql = `SELECT tenant, kind, status, COUNT(*) AS count FROM webhook_deliveries${tenant === undefined ? '' : ' WHERE tenant = ?'} GROUP BY tenant, kind, status`;
    return (tenant === undefined ? this.statement(sql).all() : this.statement(sql).all(tenant)) as DeliveryCounts[];
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}
