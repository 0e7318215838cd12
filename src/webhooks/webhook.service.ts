import { randomBytes, randomUUID } from 'node:crypto';
import { LedgerProblem } from '@recovery-ledger/core';
import type { Clock } from '../shared/clock';
import { secretScanner } from '../ledger/secret-scanner';
import type { EventStore, StoredEvent, Subscription as LogSubscription } from '../store/event-store.port';
import { OPERATION_STREAM_PREFIX, operationStream } from '../store/stream-names';
import { NOTIFICATION_KINDS, reactionsTo, retryDelayMs, type NotificationKind } from './notification-rules';
import { deliveryId } from './webhook-store.port';
import { postWebhook } from './webhook-post';
import { signedHeaders } from './webhook-signature';
import { scannedParts, urlRefusal } from './webhook-url';
import {
  ConsumerTurnLostError,
  TEST_EVENT_KIND,
  type ConsumedBatch,
  type Delivery,
  type DeliveryKind,
  type NewDelivery,
  type Subscription,
  type UnknownWatch,
  type WebhookStore,
} from './webhook-store.port';

export interface WebhookSettings {
  /** First retry after this long; each later one waits twice as long, up to retryMaxMs. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** A delivery is given up (status `failed`) after this many attempts. */
  maxAttempts: number;
  /** How long one POST may take before it counts as failed. */
  timeoutMs: number;
  /** How often the dispatcher looks for due work when nothing wakes it. */
  pollMs: number;
  /** LEDGER_WEBHOOK_ALLOW_PRIVATE: receivers on loopback, link-local and private addresses (webhook-address.ts). */
  allowPrivate: boolean;
  /**
   * LEDGER_PUBLIC_BASE_URL: where receivers reach this service, so a payload's links are absolute;
   * without it they are paths on the service (docs/webhooks.md, "Payload").
   */
  publicBaseUrl?: string;
}

export const DEFAULT_WEBHOOK_SETTINGS: WebhookSettings = {
  retryBaseMs: 1000,
  retryMaxMs: 5 * 60_000,
  maxAttempts: 50,
  timeoutMs: 10_000,
  pollMs: 1000,
  allowPrivate: false,
};

export interface WebhookObserver {
  onAttempt?(tenant: string, kind: string, outcome: 'delivered' | 'failed' | 'gave_up'): void;
  onError?(error: Error, where: string): void;
}

export interface NewSubscription {
  url: string;
  kinds?: NotificationKind[];
  unknown_after_ms?: number;
  premature_refusals?: number;
}

/**
 * A `whsec_` secret as Standard Webhooks has it: 24 random bytes in standard base64 (no `-`, `_` or
 * padding), which the spec's reference libraries decode as the HMAC key.
 */
export function newSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** How long a rotated-out secret keeps signing by default: a day, as Standard Webhooks suggests for an overlap. */
export const DEFAULT_ROTATION_OVERLAP_SECONDS = 86_400;

/** 15 minutes unresolved, three premature lookups in a row: the defaults a subscription may change. */
export const DEFAULT_UNKNOWN_AFTER_MS = 15 * 60_000;
export const DEFAULT_PREMATURE_REFUSALS = 3;

interface StepContext {
  run_id?: string;
  tool?: string;
  status?: string;
  reason?: string;
  since?: string;
  last_transition_id?: string;
}

/** Where the step stands, from its own stream: the plan names run and tool, the last transition the rest. */
function contextOf(events: readonly StoredEvent[]): StepContext {
  const context: StepContext = {};
  for (const event of events) {
    const data = event.data as Record<string, unknown>;
    if (event.type === 'StepPlanned' && context.tool === undefined) {
      context.run_id = String(data.run_id ?? '');
      context.tool = String(data.tool ?? '');
    }
    if (event.type === 'TransitionRecorded') {
      context.status = String(data.to ?? '');
      context.reason = String(data.reason ?? '');
      context.since = event.metadata.recorded_at;
      context.last_transition_id = event.event_id;
    }
  }
  return context;
}

/**
 * Why a POST got no answer, as the network said it: the system error's code first (ECONNREFUSED,
 * ENOTFOUND, ECONNRESET, …) and its message, from the error or its cause; never a bare "fetch failed".
 */
export function failureCause(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const inner = (error as Error & { cause?: unknown }).cause;
  const source = (error as NodeJS.ErrnoException).code || !(inner instanceof Error) ? error : inner;
  const code = (source as NodeJS.ErrnoException).code;
  return code ? `${code}: ${source.message}` : `${source.name}: ${source.message}`;
}

/** How long the checkpoint may trail the consumed log when the batches in between changed nothing. */
const CHECKPOINT_DELAY_MS = 1000;
/**
 * A claimed delivery is held for one POST's timeout and this much more (the row's update after the
 * answer): past that, its sender is taken for dead and another instance sends it, under its same id.
 */
const CLAIM_MARGIN_MS = 5000;

/**
 * Deliveries in flight at once, all tenants together, and the share of them one tenant may hold
 * (docs/webhooks.md, "Delivery"): a tenant whose receivers hang until the timeout holds at most its
 * share, so the others' notifications keep going out.
 */
export const DELIVERY_SLOTS = 16;
export const TENANT_DELIVERY_SLOTS = 4;
/** Active subscriptions one tenant may have (docs/webhooks.md, "Subscribing"). */
export const MAX_SUBSCRIPTIONS_PER_TENANT = 25;

/**
 * Webhooks from the log (docs/webhooks.md). A consumer follows the global log from its own
 * checkpoint and turns transitions into outbox rows, committed with the checkpoint in one
 * transaction, so a crash neither loses nor repeats one; a dispatcher posts each row, signed, until
 * the receiver answers 2xx, with doubling backoff. A receiver may see a delivery twice (after a
 * crash between its answer and the row's update): the `Recovery-Ledger-Delivery` id is the same.
 */
export class WebhookService {
  private running = false;
  private logSubscription: LogSubscription | undefined;
  private dispatcher: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private restartTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly inFlight = new Set<string>();
  private readonly inFlightPerTenant = new Map<string, number>();
  /** The attempts under way, awaited at stop; `stopping` aborts their POSTs. */
  private readonly attempts = new Set<Promise<void>>();
  private stopping = new AbortController();
  /** An attempt ended while the dispatcher was busy: it looks for due work again without waiting. */
  private slotFreed = false;
  /** The log consumed up to here; the durable checkpoint may trail it by batches that changed nothing. */
  private consumedTo = 0;
  private checkpointTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly log: EventStore,
    private readonly hooks: WebhookStore,
    private readonly clock: Clock,
    private readonly settings: WebhookSettings = DEFAULT_WEBHOOK_SETTINGS,
    private readonly observer: WebhookObserver = {},
  ) {}

  // ---- subscriptions ------------------------------------------------------------------------------

  async subscribe(tenant: string, request: NewSubscription): Promise<Subscription> {
    const url = new URL(request.url);
    const refusal = urlRefusal(url, {
      allowPrivate: this.settings.allowPrivate,
      detect: await secretScanner.detectorFor(scannedParts(url)),
    });
    if (refusal !== undefined) throw new LedgerProblem('BAD_REQUEST', refusal, { field: 'url' });
    const subscription: Subscription = {
      id: `whk_${randomUUID().replace(/-/g, '').slice(0, 20)}`,
      tenant,
      url: request.url,
      secret: newSecret(),
      kinds: request.kinds && request.kinds.length > 0 ? [...new Set(request.kinds)] : [...NOTIFICATION_KINDS],
      unknown_after_ms: request.unknown_after_ms ?? DEFAULT_UNKNOWN_AFTER_MS,
      premature_refusals: request.premature_refusals ?? DEFAULT_PREMATURE_REFUSALS,
      created_at: this.clock.now().toISOString(),
      // What is in the log when it is made is history, not news.
      created_position: await this.log.headPosition(),
      active: true,
    };
    // Counted after the awaits above, so two requests at once cannot both take the last place.
    if ((await this.hooks.subscriptions(tenant)).length >= MAX_SUBSCRIPTIONS_PER_TENANT) {
      throw new LedgerProblem(
        'WEBHOOK_SUBSCRIPTION_LIMIT',
        `this tenant has ${MAX_SUBSCRIPTIONS_PER_TENANT} active subscriptions, the most it may have: end one first`,
      );
    }
    await this.hooks.addSubscription(subscription);
    return subscription;
  }

  /**
   * A new secret; the one it replaces keeps signing beside it for `overlapSeconds`, so receivers can
   * move to the new one without missing a delivery (docs/webhooks.md, "Rotating a secret").
   */
  async rotateSecret(
    tenant: string,
    id: string,
    overlapSeconds = DEFAULT_ROTATION_OVERLAP_SECONDS,
  ): Promise<{ secret: string; previous_secret_until: string }> {
    const secret = newSecret();
    const previousSecretUntil = new Date(this.clock.now().getTime() + overlapSeconds * 1000).toISOString();
    if (!(await this.hooks.rotateSecret(tenant, id, secret, previousSecretUntil))) {
      throw new LedgerProblem('WEBHOOK_NOT_FOUND', 'no active subscription of this tenant has this id');
    }
    return { secret, previous_secret_until: previousSecretUntil };
  }

  // ---- the consumer -----------------------------------------------------------------------------

  start(): void {
    if (this.running) return;
    this.running = true;
    this.stopping = new AbortController();
    this.follow();
    this.dispatcher = this.dispatchLoop();
  }

  async stop(): Promise<void> {
    this.running = false;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    const subscription = this.logSubscription;
    this.logSubscription = undefined;
    await subscription?.close().catch(() => undefined);
    this.wake?.();
    await this.dispatcher;
    // A POST still waiting on its receiver is abandoned: its delivery stays due and goes out at the next start.
    this.stopping.abort();
    await Promise.all([...this.attempts]);
    try {
      await this.writeCheckpoint();
    } catch (error) {
      // Not written: the batches since the last checkpoint are consumed again at start, changing nothing.
      this.observer.onError?.(error instanceof Error ? error : new Error(String(error)), 'checkpoint');
    }
  }

  /**
   * Consumes the log into the outbox once this instance has the consumer's turn: where instances
   * share the store, one of them consumes and the others ask again every second, so the one that
   * takes over after a crash goes on from the durable checkpoint (docs/postgres.md, "Webhooks").
   */
  private follow(): void {
    if (!this.running) return;
    const again = () => {
      if (this.running) this.restartTimer = setTimeout(() => this.follow(), 1000);
    };
    this.hooks
      .takeConsumerTurn()
      .then(async (turn) => {
        if (!turn) return again();
        // What this instance consumed before it lost a turn is nothing to it now: the durable
        // checkpoint, moved by whoever consumed since, says where to go on from.
        if (this.checkpointTimer) clearTimeout(this.checkpointTimer);
        this.checkpointTimer = undefined;
        const after = await this.hooks.checkpoint();
        this.consumedTo = after;
        if (!this.running) return;
        this.logSubscription = this.log.subscribe(
          { after, streamPrefix: OPERATION_STREAM_PREFIX },
          {
            onEvents: (events) => this.consume(events),
            onError: (error) => {
              this.observer.onError?.(error, 'log subscription');
              this.logSubscription = undefined;
              // Follow again from the durable checkpoint: what was consumed stays consumed.
              again();
            },
          },
        );
      })
      .catch((error: unknown) => {
        this.observer.onError?.(error instanceof Error ? error : new Error(String(error)), 'log subscription');
        again();
      });
  }

  /**
   * One batch of the log: its outbox rows and watches, then the checkpoint, in one transaction. A
   * batch that changes no row (most of them: no subscription listens, no counter to reset) leaves
   * the checkpoint to be written within a second, in a transaction of its own: each commit here is a
   * sync of the disk on the service's thread, and consuming such a batch again after a crash changes
   * nothing either.
   */
  async consume(events: StoredEvent[]): Promise<void> {
    const checkpoint = Math.max(await this.hooks.checkpoint(), this.consumedTo);
    const fresh = events.filter((event) => event.position > checkpoint);
    if (fresh.length === 0) return;
    const batch: ConsumedBatch = {
      position: fresh[fresh.length - 1].position,
      deliveries: [],
      watches: [],
      resetPremature: [],
    };
    const subscriptionsOf = new Map<string, Subscription[]>();
    for (const event of fresh) {
      const { tenant, operation_ref } = event.metadata;
      const reactions = reactionsTo(event);
      if (reactions.length === 0) continue;
      if (!subscriptionsOf.has(tenant)) subscriptionsOf.set(tenant, await this.hooks.subscriptions(tenant));
      const subscriptions = (subscriptionsOf.get(tenant) ?? []).filter(
        (subscription) => subscription.created_position < event.position,
      );
      for (const reaction of reactions) {
        if (reaction.do === 'reset_premature') {
          batch.resetPremature.push({ tenant, operation_ref });
        } else if (reaction.do === 'watch_unknown') {
          for (const subscription of subscriptions.filter((candidate) =>
            candidate.kinds.includes('unknown_outcome.unresolved'),
          )) {
            batch.watches.push({
              subscription_id: subscription.id,
              tenant,
              operation_ref,
              transition_event_id: reaction.transition_event_id,
              since: reaction.since,
              due_ms: Date.parse(reaction.since) + subscription.unknown_after_ms,
            });
          }
        } else {
          const listening = subscriptions.filter((candidate) => candidate.kinds.includes(reaction.kind));
          if (listening.length === 0) continue;
          const stream = await this.log.readStream(operationStream(tenant, operation_ref));
          const context = contextOf(stream.filter((stored) => stored.position <= event.position));
          for (const subscription of listening) {
            batch.deliveries.push(
              this.delivery(
                subscription,
                reaction.kind,
                `${reaction.kind}:${reaction.key}`,
                operation_ref,
                event.metadata.recorded_at,
                {
                  ...context,
                  event_id: event.event_id,
                  position: event.position,
                },
              ),
            );
          }
        }
      }
    }
    if (await this.hooks.commitBatch(batch, { checkpointOnlyWithChanges: true })) {
      if (this.checkpointTimer) clearTimeout(this.checkpointTimer);
      this.checkpointTimer = undefined;
    } else {
      this.checkpointTimer ??= setTimeout(() => {
        this.checkpointTimer = undefined;
        this.writeCheckpoint().catch((error: unknown) =>
          this.observer.onError?.(error instanceof Error ? error : new Error(String(error)), 'checkpoint'),
        );
      }, CHECKPOINT_DELAY_MS).unref();
    }
    this.consumedTo = Math.max(this.consumedTo, batch.position);
    if (batch.deliveries.length > 0 || batch.watches.length > 0) this.wake?.();
  }

  /** Makes the consumed position durable (a batch that changed nothing did not write it). */
  private async writeCheckpoint(): Promise<void> {
    if (this.checkpointTimer) clearTimeout(this.checkpointTimer);
    this.checkpointTimer = undefined;
    const consumedTo = this.consumedTo;
    if (consumedTo > (await this.hooks.checkpoint())) {
      try {
        await this.hooks.commitBatch({ position: consumedTo, deliveries: [], watches: [], resetPremature: [] });
      } catch (error) {
        if (!(error instanceof ConsumerTurnLostError)) throw error;
        // Another instance consumes now and owns the checkpoint: nothing of this one's is left to write.
        if (this.consumedTo === consumedTo) this.consumedTo = 0;
      }
    }
  }

  /**
   * A refused premature lookup is not in the log (only refused dispatches are recorded), so it is
   * counted here, at the refusal, and written before the refusal is answered.
   */
  async onRefused(code: string, tenant: string, operationRef: string): Promise<void> {
    if (code !== 'VERIFICATION_PREMATURE') return;
    const listening = (await this.hooks.subscriptions(tenant)).filter((subscription) =>
      subscription.kinds.includes('verification.premature_repeated'),
    );
    if (listening.length === 0) return;
    // A batch consumed again after a crash must not reset a count taken after it: the position
    // consumed so far is made durable before counting.
    await this.writeCheckpoint();
    const count = await this.hooks.countPremature(tenant, operationRef);
    const at = this.clock.now().toISOString();
    const due = listening.filter((subscription) => count === subscription.premature_refusals);
    if (due.length === 0) return;
    await this.hooks.insertDeliveries(
      due.map((subscription) =>
        this.delivery(
          subscription,
          'verification.premature_repeated',
          `premature:${operationRef}:${randomUUID()}`,
          operationRef,
          at,
          {
            refusals: count,
            code,
          },
        ),
      ),
    );
    this.wake?.();
  }

  /** A link in a payload: absolute from LEDGER_PUBLIC_BASE_URL when it is set, else the path alone. */
  private link(path: string): string {
    return `${this.settings.publicBaseUrl ?? ''}${path}`;
  }

  private delivery(
    subscription: Subscription,
    kind: DeliveryKind,
    cause: string,
    operationRef: string,
    createdAt: string,
    data: Record<string, unknown>,
  ): NewDelivery {
    const id = deliveryId(subscription.id, cause);
    const encoded = encodeURIComponent(operationRef);
    const body = JSON.stringify({
      id,
      type: kind,
      created_at: createdAt,
      tenant: subscription.tenant,
      subscription_id: subscription.id,
      data: operationRef ? { operation_ref: operationRef, ...data } : data,
      links: operationRef
        ? {
            operation: this.link(`/v1/operations/${encoded}`),
            evidence: this.link(`/v1/operations/${encoded}/evidence`),
            console: this.link(`/ui#/operation/${encoded}`),
          }
        : { console: this.link('/ui#/webhooks') },
    });
    return {
      id,
      subscription_id: subscription.id,
      tenant: subscription.tenant,
      kind,
      operation_ref: operationRef,
      body,
      created_at: createdAt,
    };
  }

  // ---- an admin's resend and test event ---------------------------------------------------------------

  /**
   * Sends one delivery again, under its own id (a receiver that saw it dedupes by `webhook-id`):
   * due now, its attempts kept, so one that had been given up gets one more attempt.
   */
  async resend(tenant: string, id: string): Promise<Delivery> {
    const delivery = await this.hooks.delivery(tenant, id);
    if (!delivery) throw new LedgerProblem('WEBHOOK_DELIVERY_NOT_FOUND', 'no delivery of this tenant has this id');
    await this.activeSubscription(tenant, delivery.subscription_id);
    const requeued = (await this.hooks.requeue(tenant, id, this.clock.now().getTime())) as Delivery;
    this.wake?.();
    return requeued;
  }

  /** Queues a `webhook.test` delivery to one subscription, signed like any other. */
  async sendTestEvent(tenant: string, subscriptionId: string): Promise<Delivery> {
    const subscription = await this.activeSubscription(tenant, subscriptionId);
    const now = this.clock.now().toISOString();
    const delivery = this.delivery(subscription, TEST_EVENT_KIND, `test:${randomUUID()}`, '', now, {
      message: 'A test event sent by an admin of this tenant; nothing happened to any operation.',
    });
    await this.hooks.insertDeliveries([delivery]);
    this.wake?.();
    return (await this.hooks.delivery(tenant, delivery.id)) as Delivery;
  }

  private async activeSubscription(tenant: string, id: string): Promise<Subscription> {
    const subscription = (await this.hooks.subscriptions(tenant, false)).find((candidate) => candidate.id === id);
    if (!subscription) throw new LedgerProblem('WEBHOOK_NOT_FOUND', 'no subscription of this tenant has this id');
    if (!subscription.active)
      throw new LedgerProblem(
        'WEBHOOK_SUBSCRIPTION_INACTIVE',
        subscription.disabled_reason
          ? `the subscription was disabled (${subscription.disabled_reason}): nothing is sent to it`
          : 'the subscription was ended: nothing is sent to it',
      );
    return subscription;
  }

  // ---- the dispatcher -----------------------------------------------------------------------------

  private async dispatchLoop(): Promise<void> {
    while (this.running) {
      try {
        await this.settleWatches();
        await this.deliverDue();
      } catch (error) {
        this.observer.onError?.(error instanceof Error ? error : new Error(String(error)), 'dispatcher');
      }
      if (!this.running) break;
      if (this.slotFreed) {
        this.slotFreed = false;
        continue;
      }
      let next: number | undefined;
      try {
        next = await this.hooks.nextDueMs();
      } catch (error) {
        this.observer.onError?.(error instanceof Error ? error : new Error(String(error)), 'dispatcher');
      }
      const now = this.clock.now().getTime();
      // A delivery already due is in flight or waits for a slot: an attempt's end wakes the loop.
      const waitMs = Math.max(
        10,
        Math.min(this.settings.pollMs, next === undefined || next <= now ? this.settings.pollMs : next - now),
      );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, waitMs);
        this.wake = () => {
          // Once: a later attempt's end then marks slotFreed instead of waking a loop already awake.
          this.wake = undefined;
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
  }

  /** An unknown outcome whose time is up is notified if the step still waits on that same lookup. */
  private async settleWatches(): Promise<void> {
    const now = this.clock.now();
    for (const watch of await this.hooks.dueWatches(now.getTime(), 100)) {
      const subscription = (await this.hooks.subscriptions(watch.tenant)).find(
        (candidate) => candidate.id === watch.subscription_id,
      );
      const stream = await this.log.readStream(operationStream(watch.tenant, watch.operation_ref));
      const context = contextOf(stream);
      const stillWaiting =
        subscription !== undefined &&
        context.last_transition_id === watch.transition_event_id &&
        context.status === 'verifying';
      await this.hooks.settleWatch(
        watch.id,
        stillWaiting ? this.unknownDelivery(subscription, watch, context, now) : undefined,
      );
    }
  }

  private unknownDelivery(
    subscription: Subscription,
    watch: UnknownWatch,
    context: StepContext,
    now: Date,
  ): NewDelivery {
    return this.delivery(
      subscription,
      'unknown_outcome.unresolved',
      `unknown:${watch.transition_event_id}`,
      watch.operation_ref,
      now.toISOString(),
      {
        ...context,
        event_id: watch.transition_event_id,
        unresolved_ms: now.getTime() - Date.parse(watch.since),
      },
    );
  }

  /**
   * Starts the due deliveries there are slots for, oldest first, without waiting for them: at most
   * DELIVERY_SLOTS in flight, at most TENANT_DELIVERY_SLOTS of one tenant, so receivers that hang
   * until the timeout hold back their own tenant's deliveries only. The store answers at most that
   * many due rows per tenant, so one tenant's backlog cannot crowd the others out of the page.
   */
  private async deliverDue(): Promise<void> {
    if (this.inFlight.size >= DELIVERY_SLOTS) return;
    const due = (await this.hooks.dueDeliveries(this.clock.now().getTime(), 200, TENANT_DELIVERY_SLOTS)).filter(
      (delivery) => !this.inFlight.has(delivery.id),
    );
    if (due.length === 0) return;
    // The rows there are slots for, claimed before they are sent: where instances share the outbox,
    // each row goes to one of them at a time (docs/postgres.md, "Webhooks").
    const free = { all: DELIVERY_SLOTS - this.inFlight.size, perTenant: new Map(this.inFlightPerTenant) };
    const chosen = due.filter((delivery) => {
      const held = free.perTenant.get(delivery.tenant) ?? 0;
      if (free.all <= 0 || held >= TENANT_DELIVERY_SLOTS) return false;
      free.all -= 1;
      free.perTenant.set(delivery.tenant, held + 1);
      return true;
    });
    const claimed = new Set(
      await this.hooks.claimDeliveries(
        chosen.map((delivery) => delivery.id),
        this.settings.timeoutMs + CLAIM_MARGIN_MS,
      ),
    );
    const subscriptions = new Map(
      (await this.hooks.subscriptions(undefined, false)).map((subscription) => [subscription.id, subscription]),
    );
    for (const delivery of chosen) {
      if (!claimed.has(delivery.id) || this.inFlight.has(delivery.id)) continue;
      if (!this.running || this.inFlight.size >= DELIVERY_SLOTS) break;
      if ((this.inFlightPerTenant.get(delivery.tenant) ?? 0) >= TENANT_DELIVERY_SLOTS) continue;
      const attempt: Promise<void> = this.attempt(delivery, subscriptions.get(delivery.subscription_id))
        .catch((error: unknown) =>
          this.observer.onError?.(error instanceof Error ? error : new Error(String(error)), 'dispatcher'),
        )
        .finally(() => {
          this.attempts.delete(attempt);
          if (this.wake) this.wake();
          else this.slotFreed = true;
        });
      this.attempts.add(attempt);
    }
  }

  private async attempt(delivery: Delivery, subscription: Subscription | undefined): Promise<void> {
    if (!subscription || !subscription.active) {
      await this.hooks.markAttemptFailed(delivery.id, {
        error: subscription?.disabled_reason
          ? `the subscription was disabled: ${subscription.disabled_reason}`
          : 'the subscription was removed',
      });
      this.observer.onAttempt?.(delivery.tenant, delivery.kind, 'gave_up');
      return;
    }
    this.inFlight.add(delivery.id);
    this.inFlightPerTenant.set(delivery.tenant, (this.inFlightPerTenant.get(delivery.tenant) ?? 0) + 1);
    let status: number | undefined;
    let error: string | undefined;
    const now = this.clock.now();
    const secrets = [
      subscription.secret,
      ...(subscription.previous_secret &&
      subscription.previous_secret_until &&
      Date.parse(subscription.previous_secret_until) > now.getTime()
        ? [subscription.previous_secret]
        : []),
    ];
    try {
      const answer = await postWebhook(
        subscription.url,
        delivery.body,
        {
          'content-type': 'application/json',
          'user-agent': 'recovery-ledger-webhooks',
          ...signedHeaders(secrets, delivery.id, delivery.body, Math.floor(now.getTime() / 1000)),
          'Recovery-Ledger-Delivery': delivery.id,
          'Recovery-Ledger-Event': delivery.kind,
        },
        {
          timeoutMs: this.settings.timeoutMs,
          allowPrivate: this.settings.allowPrivate,
          signal: this.stopping.signal,
        },
      );
      status = answer.status;
      if (status < 200 || status > 299)
        error = `the receiver answered ${status}${answer.prefix.trim() ? `: ${answer.prefix.trim().slice(0, 200)}` : ''}`;
    } catch (cause) {
      error = failureCause(cause);
    } finally {
      this.inFlight.delete(delivery.id);
      const held = (this.inFlightPerTenant.get(delivery.tenant) ?? 1) - 1;
      if (held > 0) this.inFlightPerTenant.set(delivery.tenant, held);
      else this.inFlightPerTenant.delete(delivery.tenant);
    }
    // Abandoned at stop: not an attempt of the receiver's, so nothing is recorded against it.
    if (this.stopping.signal.aborted && error !== undefined) return;
    if (error === undefined) {
      await this.hooks.markDelivered(delivery.id, status as number, this.clock.now().toISOString());
      this.observer.onAttempt?.(delivery.tenant, delivery.kind, 'delivered');
      return;
    }
    const attempts = delivery.attempts + 1;
    if (status === 410) {
      // Standard Webhooks: a receiver answering 410 Gone wants nothing more. The subscription is
      // disabled, why is kept for the admin API, and this delivery is not retried.
      await this.hooks.disable(subscription.id, 'the receiver answered 410 Gone', this.clock.now().toISOString());
      await this.hooks.markAttemptFailed(delivery.id, { status, error });
      this.observer.onAttempt?.(delivery.tenant, delivery.kind, 'gave_up');
      return;
    }
    const giveUp = attempts >= this.settings.maxAttempts;
    await this.hooks.markAttemptFailed(delivery.id, {
      status,
      error,
      nextAttemptMs: giveUp
        ? undefined
        : this.clock.now().getTime() + retryDelayMs(attempts, this.settings.retryBaseMs, this.settings.retryMaxMs),
    });
    this.observer.onAttempt?.(delivery.tenant, delivery.kind, giveUp ? 'gave_up' : 'failed');
  }
}
