import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { NotificationKind } from './notification-rules';

/** Where an instance keeps its webhook subscriptions, outbox and checkpoint. */
export function webhookFile(dataDir: string): string {
  return join(dataDir, 'webhooks.sqlite');
}

/** The same delivery (subscription, cause) always has the same id, so a receiver can drop a repeat. */
export function deliveryId(subscriptionId: string, dedupe: string): string {
  return `dlv_${createHash('sha256').update(`${subscriptionId}\n${dedupe}`).digest('hex').slice(0, 32)}`;
}

/** What an admin's "send test event" delivers (docs/webhooks.md, "Resend and test events"): no operation behind it. */
export const TEST_EVENT_KIND = 'webhook.test';
export type DeliveryKind = NotificationKind | typeof TEST_EVENT_KIND;

/**
 * Where webhook subscriptions, the outbox of deliveries and the consumer's checkpoint live. The
 * outbox rows and the checkpoint are written in one transaction, so the consumer that fills it
 * neither loses nor repeats a notification across a crash; a delivery leaves the outbox only once
 * the receiver answered 2xx (at least once).
 */
export interface Subscription {
  id: string;
  tenant: string;
  url: string;
  /** Shown once, when the subscription is made; never listed. */
  secret: string;
  kinds: NotificationKind[];
  /** An unknown outcome still unresolved after this long is notified. */
  unknown_after_ms: number;
  /** This many VERIFICATION_PREMATURE refusals on one operation without a transition are notified. */
  premature_refusals: number;
  created_at: string;
  /** The log position when it was made: it is told about what happens after. */
  created_position: number;
  active: boolean;
  /** During a rotation's overlap the secret it replaced signs too, until previous_secret_until. */
  previous_secret?: string;
  previous_secret_until?: string;
  /** Why the subscription stopped without being ended by an admin (a receiver's `410 Gone`), and when. */
  disabled_reason?: string;
  disabled_at?: string;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

export interface Delivery {
  id: string;
  subscription_id: string;
  tenant: string;
  kind: DeliveryKind;
  /** Empty for a test event. */
  operation_ref: string;
  body: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_ms: number;
  last_status?: number;
  last_error?: string;
  created_at: string;
  delivered_at?: string;
}

export interface NewDelivery {
  /** deliveryId(subscription_id, cause): the same for every replay of the same cause. */
  id: string;
  subscription_id: string;
  tenant: string;
  kind: DeliveryKind;
  operation_ref: string;
  body: string;
  created_at: string;
}

export interface UnknownWatch {
  id: number;
  subscription_id: string;
  tenant: string;
  operation_ref: string;
  transition_event_id: string;
  since: string;
  due_ms: number;
}

/** What one consumed batch changes, written with the checkpoint in one transaction. */
export interface ConsumedBatch {
  position: number;
  deliveries: NewDelivery[];
  watches: Array<Omit<UnknownWatch, 'id'>>;
  resetPremature: Array<{ tenant: string; operation_ref: string }>;
}

export interface DeliveryCounts {
  tenant: string;
  kind: string;
  status: DeliveryStatus;
  count: number;
}

/**
 * Where instances share one store (PostgreSQL), the one that holds the consumer's turn and then
 * finds it lost (its session ended and another took over) is refused here: it stops consuming and
 * asks for the turn again, and the new consumer goes on from the durable checkpoint.
 */
export class ConsumerTurnLostError extends Error {
  constructor(detail: string) {
    super(`not the webhook consumer: ${detail}`);
    this.name = 'ConsumerTurnLostError';
  }
}

/**
 * Every method answers a promise: a store shared by several instances (PostgreSQL) is on the
 * network. One that sits in a file of its own instance (SQLite) answers at once.
 */
export interface WebhookStore {
  addSubscription(subscription: Subscription): Promise<void>;
  deactivate(tenant: string, id: string): Promise<boolean>;
  /** Ends a subscription because of what its receiver answered, keeping why; false when it was not active. */
  disable(id: string, reason: string, at: string): Promise<boolean>;
  /** A new secret for an active subscription; the one it replaces keeps signing until previousUntil. */
  rotateSecret(tenant: string, id: string, secret: string, previousUntil: string): Promise<boolean>;
  subscriptions(tenant?: string, activeOnly?: boolean): Promise<Subscription[]>;
  /**
   * Asks for the consumer's turn: true when this store's instance is the one that consumes the log
   * into the outbox. Where the store is shared, one instance holds it at a time, and commitBatch
   * refuses (ConsumerTurnLostError) once it is lost; a store of one instance always answers true.
   */
  takeConsumerTurn(): Promise<boolean>;
  checkpoint(): Promise<number>;
  /**
   * Writes the batch's rows and moves the checkpoint to its position, in one transaction. With
   * `checkpointOnlyWithChanges`, a batch that changed no row leaves the checkpoint where it was
   * (nothing is written, so the commit costs no sync); answers whether the checkpoint moved.
   */
  commitBatch(batch: ConsumedBatch, options?: { checkpointOnlyWithChanges?: boolean }): Promise<boolean>;
  /** Counts one premature refusal and answers the count since the operation last moved. */
  countPremature(tenant: string, operationRef: string): Promise<number>;
  insertDeliveries(deliveries: NewDelivery[]): Promise<void>;
  dueWatches(nowMs: number, limit: number): Promise<UnknownWatch[]>;
  /**
   * Ends a watch, and enqueues its delivery if there is one, in one transaction; a watch another
   * instance has already ended enqueues nothing.
   */
  settleWatch(id: number, delivery?: NewDelivery): Promise<void>;
  /**
   * Pending deliveries due by `nowMs`, oldest first; at most `perTenant` of each tenant when given.
   * A delivery another instance has claimed (claimDeliveries) is not due until its hold ends.
   */
  dueDeliveries(nowMs: number, limit: number, perTenant?: number): Promise<Delivery[]>;
  /**
   * Claims due deliveries for one attempt each, for `holdMs`: until the attempt is marked or the
   * hold ends, no other instance sharing the store is answered them, so a delivery is not sent twice
   * at once; after a crash it is sent again once the hold ends (at least once, one id). Answers the
   * ids claimed. A store of one instance claims every id it is given.
   */
  claimDeliveries(ids: string[], holdMs: number): Promise<string[]>;
  nextDueMs(): Promise<number | undefined>;
  markDelivered(id: string, status: number, at: string): Promise<void>;
  markAttemptFailed(id: string, outcome: { status?: number; error: string; nextAttemptMs?: number }): Promise<void>;
  deliveries(tenant: string, options: { status?: DeliveryStatus; limit: number }): Promise<Delivery[]>;
  /** One delivery of the tenant, if it has it. */
  delivery(tenant: string, id: string): Promise<Delivery | undefined>;
  /**
   * Sends a delivery of the tenant again: pending and due at `nowMs`, its attempts kept, so a
   * delivery that had been given up gets one more attempt. Answers the row as it now stands.
   */
  requeue(tenant: string, id: string, nowMs: number): Promise<Delivery | undefined>;
  counts(tenant?: string): Promise<DeliveryCounts[]>;
  close(): Promise<void>;
}

export const WEBHOOK_STORE = Symbol('WEBHOOK_STORE');
