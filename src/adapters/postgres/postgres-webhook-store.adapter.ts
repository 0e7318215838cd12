import type { Client, ClientBase, Pool } from 'pg';
import { StoreUnavailableError } from '../../store/event-store.port';
import type { NotificationKind } from '../../webhooks/notification-rules';
import { openSecret, SecretBox, sealSecrets, type SecretsAtRest } from '../../webhooks/webhook-secret-box';
import {
  ConsumerTurnLostError,
  type ConsumedBatch,
  type Delivery,
  type DeliveryCounts,
  type DeliveryKind,
  type DeliveryStatus,
  type NewDelivery,
  type Subscription,
  type UnknownWatch,
  type WebhookStore,
} from '../../webhooks/webhook-store.port';
import {
  ADVISORY_LOCKS,
  inTransaction,
  migrate,
  openPool,
  query,
  electionClient,
  toPortError,
  type PostgresOptions,
} from './postgres-database';

export interface PostgresWebhookStoreOptions extends PostgresOptions {
  /** LEDGER_WEBHOOK_SECRET_KEY: signing secrets are stored wrapped with it (webhook-secret-box.ts). */
  secretKey?: Buffer;
}

interface SubscriptionRow {
  id: string;
  tenant: string;
  url: string;
  secret: string;
  kinds: string;
  unknown_after_ms: string;
  premature_refusals: number;
  created_at: string;
  created_position: string;
  active: boolean;
  previous_secret: string | null;
  previous_secret_until: string | null;
  disabled_reason: string | null;
  disabled_at: string | null;
}

interface DeliveryRow {
  id: string;
  subscription_id: string;
  tenant: string;
  kind: string;
  operation_ref: string;
  body: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_ms: string;
  last_status: number | null;
  last_error: string | null;
  created_at: string;
  delivered_at: string | null;
}

interface WatchRow {
  id: string;
  subscription_id: string;
  tenant: string;
  operation_ref: string;
  transition_event_id: string;
  since: string;
  due_ms: string;
}

/** The columns of a delivery as the port has it (not its order number nor its claim). */
const DELIVERY_COLUMNS = `id, subscription_id, tenant, kind, operation_ref, body, status, attempts, next_attempt_ms,
  last_status, last_error, created_at, delivered_at`;

/** The database's clock in milliseconds: claims are judged on one clock for every instance. */
const DATABASE_NOW_MS = '(extract(epoch from clock_timestamp()) * 1000)::bigint';

function deliveryOf(row: DeliveryRow): Delivery {
  return {
    id: row.id,
    subscription_id: row.subscription_id,
    tenant: row.tenant,
    kind: row.kind as DeliveryKind,
    operation_ref: row.operation_ref,
    body: row.body,
    status: row.status,
    attempts: row.attempts,
    next_attempt_ms: Number(row.next_attempt_ms),
    ...(row.last_status === null ? {} : { last_status: row.last_status }),
    ...(row.last_error === null ? {} : { last_error: row.last_error }),
    created_at: row.created_at,
    ...(row.delivered_at === null ? {} : { delivered_at: row.delivered_at }),
  };
}

interface ConsumerSession {
  client: Client;
  /** Why the session ended, once it has. */
  lost: Error | undefined;
  /** Transactions on the session run one after another (one connection, one transaction at a time). */
  queue: Promise<unknown>;
  /** Ends the session (and with it the lock, if the server still holds it for this session). */
  lose(error: Error): void;
}

/**
 * The webhook subscriptions, outbox and consumer checkpoint in PostgreSQL, shared by every instance
 * on the database (docs/postgres.md, "Webhooks"): a subscription made on one instance is read by
 * all, any instance sends due deliveries, and one consumes the log into the outbox.
 *
 * The consumer is whoever holds `pg_try_advisory_lock` on a session of its own, and every batch it
 * commits is a transaction on that same session, the checkpoint row locked first: when the process
 * dies the server ends the session, the lock and any batch in flight with it, and the next consumer
 * goes on from the committed checkpoint. A delivery's id is fixed by its subscription and cause
 * (deliveryId), and rows are inserted `ON CONFLICT DO NOTHING`, so a batch consumed again after a
 * takeover adds no second delivery.
 *
 * A sender claims the rows it is about to post (`FOR UPDATE SKIP LOCKED`, then a hold on the row
 * until the attempt's timeout has passed) in a short transaction of its own, so no transaction, and
 * no transaction id holding back the log's followers, stays open while a receiver answers.
 */
export class PostgresWebhookStore implements WebhookStore {
  private readonly pool: Pool;
  private readonly box: SecretBox | undefined;
  private candidate: ConsumerSession | undefined;
  private consumer: ConsumerSession | undefined;
  private closed = false;

  private constructor(
    private readonly options: PostgresWebhookStoreOptions,
    readonly secretsAtRest: SecretsAtRest,
    pool: Pool,
    box: SecretBox | undefined,
  ) {
    this.pool = pool;
    this.box = box;
  }

  /**
   * Creates the tables, and seals the signing secrets as the SQLite store does at start: wrapped
   * when there is a key (in one transaction, the rows locked, so instances starting together do
   * not wrap one secret twice), a refusal to start when the stored ones cannot be used.
   */
  static async open(options: PostgresWebhookStoreOptions): Promise<PostgresWebhookStore> {
    const pool = openPool({ maxConnections: 4, ...options });
    const box = options.secretKey ? new SecretBox(options.secretKey) : undefined;
    try {
      await migrate(pool);
      const atRest = await inTransaction(pool, async (client) => {
        const { rows } = await client.query<{ id: string; secret: string; previous_secret: string | null }>(
          'SELECT id, secret, previous_secret FROM ledger_webhook_subscriptions ORDER BY id FOR UPDATE',
        );
        const sealed = sealSecrets(rows, box, 'the PostgreSQL database (ledger_webhook_subscriptions)');
        for (const row of sealed.toWrap) {
          await client.query(
            row.column === 'secret'
              ? 'UPDATE ledger_webhook_subscriptions SET secret = $1 WHERE id = $2'
              : 'UPDATE ledger_webhook_subscriptions SET previous_secret = $1 WHERE id = $2',
            [row.wrapped, row.id],
          );
        }
        return sealed.atRest;
      });
      return new PostgresWebhookStore(options, atRest, pool, box);
    } catch (error) {
      await pool.end().catch(() => undefined);
      throw error;
    }
  }

  private open(): Pool {
    if (this.closed) throw new StoreUnavailableError('webhook store closed');
    return this.pool;
  }

  private subscriptionOf(row: SubscriptionRow): Subscription {
    return {
      id: row.id,
      tenant: row.tenant,
      url: row.url,
      secret: openSecret(row.secret, row.id, this.box),
      kinds: JSON.parse(row.kinds) as NotificationKind[],
      unknown_after_ms: Number(row.unknown_after_ms),
      premature_refusals: row.premature_refusals,
      created_at: row.created_at,
      created_position: Number(row.created_position),
      active: row.active,
      ...(row.previous_secret && row.previous_secret_until
        ? {
            previous_secret: openSecret(row.previous_secret, row.id, this.box),
            previous_secret_until: row.previous_secret_until,
          }
        : {}),
      ...(row.disabled_reason && row.disabled_at
        ? { disabled_reason: row.disabled_reason, disabled_at: row.disabled_at }
        : {}),
    };
  }

  private wrap(secret: string, id: string): string {
    return this.box ? this.box.wrap(secret, id) : secret;
  }

  // ---- subscriptions -------------------------------------------------------------------------------

  async addSubscription(subscription: Subscription): Promise<void> {
    await query(
      this.open(),
      `INSERT INTO ledger_webhook_subscriptions (id, tenant, url, secret, kinds, unknown_after_ms, premature_refusals,
         created_at, created_position, active)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      [
        subscription.id,
        subscription.tenant,
        subscription.url,
        this.wrap(subscription.secret, subscription.id),
        JSON.stringify(subscription.kinds),
        subscription.unknown_after_ms,
        subscription.premature_refusals,
        subscription.created_at,
        subscription.created_position,
        subscription.active,
      ],
    );
  }

  async deactivate(tenant: string, id: string): Promise<boolean> {
    // An ended subscription signs nothing more: its secret is not kept (nor a reason to keep the key).
    return this.changed(
      `UPDATE ledger_webhook_subscriptions SET active = false, secret = '', previous_secret = NULL
        WHERE tenant = $1 AND id = $2 AND active`,
      [tenant, id],
    );
  }

  async disable(id: string, reason: string, at: string): Promise<boolean> {
    return this.changed(
      `UPDATE ledger_webhook_subscriptions SET active = false, secret = '', previous_secret = NULL,
         disabled_reason = $1, disabled_at = $2 WHERE id = $3 AND active`,
      [reason, at, id],
    );
  }

  async rotateSecret(tenant: string, id: string, secret: string, previousUntil: string): Promise<boolean> {
    // The current secret, as stored (wrapped or not), becomes the previous one in the same statement.
    return this.changed(
      `UPDATE ledger_webhook_subscriptions SET previous_secret = secret, previous_secret_until = $1, secret = $2
        WHERE tenant = $3 AND id = $4 AND active`,
      [previousUntil, this.wrap(secret, id), tenant, id],
    );
  }

  private async changed(text: string, values: unknown[]): Promise<boolean> {
    try {
      return ((await this.open().query(text, values)).rowCount ?? 0) > 0;
    } catch (error) {
      throw toPortError(error);
    }
  }

  async subscriptions(tenant?: string, activeOnly = true): Promise<Subscription[]> {
    const rows = await query<SubscriptionRow>(
      this.open(),
      `SELECT * FROM ledger_webhook_subscriptions
        WHERE ($1::text IS NULL OR tenant = $1) AND (active OR NOT $2)
        ORDER BY created_at, id`,
      [tenant ?? null, activeOnly],
    );
    return rows.map((row) => this.subscriptionOf(row));
  }

  // ---- the consumer ----------------------------------------------------------------------------------

  /** The session kept for asking for the turn, so a try each second costs a statement, not a backend. */
  private async session(): Promise<ConsumerSession> {
    if (this.candidate && !this.candidate.lost) return this.candidate;
    let session: ConsumerSession | undefined;
    const lose = (error: Error) => {
      // Lost while connecting: nothing was kept, and the caller is told by the throw.
      if (!session || session.lost) return;
      session.lost = error;
      if (this.candidate === session) this.candidate = undefined;
      if (this.consumer === session) this.consumer = undefined;
      session.client.end().catch(() => undefined);
    };
    const client = await electionClient(this.options, 'recovery-ledger-webhook-election', lose);
    session = { client, lost: undefined, queue: Promise.resolve(), lose };
    this.candidate = session;
    return session;
  }

  async takeConsumerTurn(): Promise<boolean> {
    if (this.consumer && !this.consumer.lost) return true;
    this.open();
    const session = await this.session();
    try {
      const { rows } = await session.client.query<{ held: boolean }>('SELECT pg_try_advisory_lock($1) AS held', [
        ADVISORY_LOCKS.webhookConsumer,
      ]);
      if (!rows[0]?.held) return false;
      // Which session consumes, as pg_stat_activity shows it to an operator.
      await session.client.query("SET application_name = 'recovery-ledger-webhook-consumer'");
    } catch (error) {
      await session.client.end().catch(() => undefined);
      throw toPortError(error);
    }
    this.candidate = undefined;
    this.consumer = session;
    return true;
  }

  /** One transaction on the consumer's own session: refused when this store does not hold the turn. */
  private onConsumerSession<T>(work: (client: Client) => Promise<T>): Promise<T> {
    const session = this.consumer;
    if (!session || session.lost) {
      return Promise.reject(new ConsumerTurnLostError(session?.lost?.message ?? 'the turn is not held'));
    }
    const run = session.queue.then(async () => {
      if (session.lost) throw new ConsumerTurnLostError(session.lost.message);
      const { client } = session;
      try {
        await client.query('BEGIN');
        const result = await work(client);
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        const failure = toPortError(error);
        // The connection failed (or ended, which sets `lost`): whether the server still holds the
        // lock for it is unknown, so the session is ended and the turn given up, not assumed.
        if (failure instanceof StoreUnavailableError) session.lose(failure);
        const lost = session.lost as Error | undefined;
        if (lost) throw new ConsumerTurnLostError(lost.message);
        throw failure;
      }
    });
    session.queue = run.catch(() => undefined);
    return run;
  }

  async checkpoint(): Promise<number> {
    const [row] = await query<{ position: string }>(
      this.open(),
      'SELECT position FROM ledger_webhook_checkpoint WHERE id = 1',
    );
    return Number(row.position);
  }

  async commitBatch(batch: ConsumedBatch, { checkpointOnlyWithChanges = false } = {}): Promise<boolean> {
    this.open();
    return this.onConsumerSession(async (client) => {
      // The checkpoint row first: whatever else writes a batch waits here, so two never interleave.
      await client.query('SELECT position FROM ledger_webhook_checkpoint WHERE id = 1 FOR UPDATE');
      let changes = await insertDeliveryRows(client, batch.deliveries);
      if (batch.watches.length > 0) {
        const watches = batch.watches;
        const { rowCount } = await client.query(
          `INSERT INTO ledger_webhook_watches (subscription_id, tenant, operation_ref, transition_event_id, since, due_ms)
           SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[])
           ON CONFLICT (subscription_id, transition_event_id) DO NOTHING`,
          [
            watches.map((row) => row.subscription_id),
            watches.map((row) => row.tenant),
            watches.map((row) => row.operation_ref),
            watches.map((row) => row.transition_event_id),
            watches.map((row) => row.since),
            watches.map((row) => row.due_ms),
          ],
        );
        changes += rowCount ?? 0;
      }
      for (const row of batch.resetPremature) {
        const { rowCount } = await client.query(
          'DELETE FROM ledger_webhook_premature WHERE tenant = $1 AND operation_ref = $2',
          [row.tenant, row.operation_ref],
        );
        changes += rowCount ?? 0;
      }
      if (changes === 0 && checkpointOnlyWithChanges) return false;
      await client.query('UPDATE ledger_webhook_checkpoint SET position = $1 WHERE id = 1 AND position < $1', [
        batch.position,
      ]);
      return true;
    });
  }

  async countPremature(tenant: string, operationRef: string): Promise<number> {
    const [row] = await query<{ count: number }>(
      this.open(),
      `INSERT INTO ledger_webhook_premature (tenant, operation_ref, count) VALUES ($1, $2, 1)
       ON CONFLICT (tenant, operation_ref) DO UPDATE SET count = ledger_webhook_premature.count + 1
       RETURNING count`,
      [tenant, operationRef],
    );
    return row.count;
  }

  async insertDeliveries(deliveries: NewDelivery[]): Promise<void> {
    if (deliveries.length === 0) return;
    await inTransaction(this.open(), (client) => insertDeliveryRows(client, deliveries));
  }

  async dueWatches(nowMs: number, limit: number): Promise<UnknownWatch[]> {
    const rows = await query<WatchRow>(
      this.open(),
      'SELECT * FROM ledger_webhook_watches WHERE due_ms <= $1 ORDER BY due_ms, id LIMIT $2',
      [nowMs, limit],
    );
    return rows.map((row) => ({ ...row, id: Number(row.id), due_ms: Number(row.due_ms) }));
  }

  async settleWatch(id: number, delivery?: NewDelivery): Promise<void> {
    await inTransaction(this.open(), async (client) => {
      // Another instance may have settled it first: the delete decides who enqueues, once.
      const { rowCount } = await client.query('DELETE FROM ledger_webhook_watches WHERE id = $1', [id]);
      if ((rowCount ?? 0) > 0 && delivery) await insertDeliveryRows(client, [delivery]);
    });
  }

  // ---- the senders ---------------------------------------------------------------------------------

  async dueDeliveries(nowMs: number, limit: number, perTenant?: number): Promise<Delivery[]> {
    const rows = await query<DeliveryRow>(
      this.open(),
      `SELECT ${DELIVERY_COLUMNS} FROM (
         SELECT *, ROW_NUMBER() OVER (PARTITION BY tenant ORDER BY next_attempt_ms, seq) AS tenant_rank
           FROM ledger_webhook_deliveries
          WHERE status = 'pending' AND next_attempt_ms <= $1 AND claimed_until_ms <= ${DATABASE_NOW_MS}
       ) AS due
       WHERE $2::integer IS NULL OR tenant_rank <= $2
       ORDER BY next_attempt_ms, seq LIMIT $3`,
      [nowMs, perTenant ?? null, limit],
    );
    return rows.map(deliveryOf);
  }

  async claimDeliveries(ids: string[], holdMs: number): Promise<string[]> {
    if (ids.length === 0) return [];
    // SKIP LOCKED: a row another instance is claiming this instant is left to it, not waited for.
    const rows = await query<{ id: string }>(
      this.open(),
      `UPDATE ledger_webhook_deliveries SET claimed_until_ms = ${DATABASE_NOW_MS} + $2
        WHERE id IN (
          SELECT id FROM ledger_webhook_deliveries
           WHERE id = ANY($1::text[]) AND status = 'pending' AND claimed_until_ms <= ${DATABASE_NOW_MS}
           FOR UPDATE SKIP LOCKED
        )
        RETURNING id`,
      [ids, holdMs],
    );
    const claimed = new Set(rows.map((row) => row.id));
    return ids.filter((id) => claimed.has(id));
  }

  async nextDueMs(): Promise<number | undefined> {
    const [row] = await query<{ at: string | null }>(
      this.open(),
      `SELECT min(at)::text AS at FROM (
         SELECT min(greatest(next_attempt_ms, claimed_until_ms)) AS at FROM ledger_webhook_deliveries WHERE status = 'pending'
         UNION ALL
         SELECT min(due_ms) FROM ledger_webhook_watches
       ) AS times`,
    );
    return row.at === null ? undefined : Number(row.at);
  }

  async markDelivered(id: string, status: number, at: string): Promise<void> {
    await query(
      this.open(),
      `UPDATE ledger_webhook_deliveries SET status = 'delivered', attempts = attempts + 1, last_status = $1,
         last_error = NULL, delivered_at = $2, claimed_until_ms = 0 WHERE id = $3`,
      [status, at, id],
    );
  }

  async markAttemptFailed(
    id: string,
    outcome: { status?: number; error: string; nextAttemptMs?: number },
  ): Promise<void> {
    // A sender taken for dead whose POST did fail must not undo another's delivery of the same row.
    await query(
      this.open(),
      `UPDATE ledger_webhook_deliveries SET attempts = attempts + 1, last_status = $1, last_error = $2,
         status = CASE WHEN $3::bigint IS NULL THEN 'failed' ELSE 'pending' END,
         next_attempt_ms = COALESCE($3::bigint, next_attempt_ms), claimed_until_ms = 0
        WHERE id = $4 AND status <> 'delivered'`,
      [outcome.status ?? null, outcome.error.slice(0, 300), outcome.nextAttemptMs ?? null, id],
    );
  }

  // ---- reading the outbox --------------------------------------------------------------------------

  async deliveries(tenant: string, options: { status?: DeliveryStatus; limit: number }): Promise<Delivery[]> {
    const rows = await query<DeliveryRow>(
      this.open(),
      `SELECT ${DELIVERY_COLUMNS} FROM ledger_webhook_deliveries
        WHERE tenant = $1 AND ($2::text IS NULL OR status = $2) ORDER BY seq DESC LIMIT $3`,
      [tenant, options.status ?? null, options.limit],
    );
    return rows.map(deliveryOf);
  }

  async delivery(tenant: string, id: string): Promise<Delivery | undefined> {
    const [row] = await query<DeliveryRow>(
      this.open(),
      `SELECT ${DELIVERY_COLUMNS} FROM ledger_webhook_deliveries WHERE tenant = $1 AND id = $2`,
      [tenant, id],
    );
    return row ? deliveryOf(row) : undefined;
  }

  async requeue(tenant: string, id: string, nowMs: number): Promise<Delivery | undefined> {
    const [row] = await query<DeliveryRow>(
      this.open(),
      `UPDATE ledger_webhook_deliveries SET status = 'pending', next_attempt_ms = $1, delivered_at = NULL
        WHERE tenant = $2 AND id = $3 RETURNING ${DELIVERY_COLUMNS}`,
      [nowMs, tenant, id],
    );
    return row ? deliveryOf(row) : undefined;
  }

  async counts(tenant?: string): Promise<DeliveryCounts[]> {
    const rows = await query<{ tenant: string; kind: string; status: DeliveryStatus; count: string }>(
      this.open(),
      `SELECT tenant, kind, status, count(*) AS count FROM ledger_webhook_deliveries
        WHERE $1::text IS NULL OR tenant = $1 GROUP BY tenant, kind, status`,
      [tenant ?? null],
    );
    return rows.map((row) => ({ ...row, count: Number(row.count) }));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const session of [this.consumer, this.candidate]) {
      if (!session) continue;
      session.lost ??= new Error('the webhook store closed');
      await session.client.end().catch(() => undefined);
    }
    this.consumer = undefined;
    this.candidate = undefined;
    await this.pool.end().catch(() => undefined);
  }
}

/** Answers how many rows were new (a replayed cause's row is already there, with its progress). */
async function insertDeliveryRows(client: ClientBase, deliveries: readonly NewDelivery[]): Promise<number> {
  if (deliveries.length === 0) return 0;
  // WITH ORDINALITY and ORDER BY: rows take their order numbers (seq) in the batch's order.
  const { rowCount } = await client.query(
    `INSERT INTO ledger_webhook_deliveries (id, subscription_id, tenant, kind, operation_ref, body, status, attempts,
       next_attempt_ms, created_at)
     SELECT id, subscription_id, tenant, kind, operation_ref, body, 'pending', 0, 0, created_at
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
            WITH ORDINALITY AS t(id, subscription_id, tenant, kind, operation_ref, body, created_at, n)
      ORDER BY n
     ON CONFLICT (id) DO NOTHING`,
    [
      deliveries.map((row) => row.id),
      deliveries.map((row) => row.subscription_id),
      deliveries.map((row) => row.tenant),
      deliveries.map((row) => row.kind),
      deliveries.map((row) => row.operation_ref),
      deliveries.map((row) => row.body),
      deliveries.map((row) => row.created_at),
    ],
  );
  return rowCount ?? 0;
}
