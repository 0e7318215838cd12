import { Inject, Injectable } from '@nestjs/common';
import { LedgerProblem } from '@recovery-ledger/core';
import type { Caller } from '../auth/caller';
import { WebhookService, type NewSubscription } from './webhook.service';
import {
  WEBHOOK_STORE,
  type Delivery,
  type DeliveryStatus,
  type Subscription,
  type WebhookStore,
} from './webhook-store.port';

export interface DeliveryQuery {
  status?: DeliveryStatus;
  limit: number;
}

/** A subscription as admins see it: never its secret; the replaced secret's end only while it still signs. */
function publicView(subscription: Subscription) {
  const {
    id,
    url,
    kinds,
    unknown_after_ms,
    premature_refusals,
    created_at,
    active,
    previous_secret_until,
    disabled_reason,
    disabled_at,
  } = subscription;
  return {
    id,
    url,
    kinds,
    unknown_after_ms,
    premature_refusals,
    created_at,
    active,
    ...(active && previous_secret_until && Date.parse(previous_secret_until) > Date.now()
      ? { previous_secret_until }
      : {}),
    ...(disabled_reason ? { disabled_reason, disabled_at } : {}),
  };
}

/**
 * Webhook subscriptions, per tenant, configured by an admin; deliveries readable by any key of the
 * tenant (no secret and no body in them; where they go and why an attempt failed to admins only),
 * so the console shows what was sent and what failed (docs/webhooks.md).
 */
@Injectable()
export class WebhookSubscriptions {
  constructor(
    @Inject(WebhookService) private readonly webhooks: WebhookService,
    @Inject(WEBHOOK_STORE) private readonly store: WebhookStore,
  ) {}

  /** The answer carries the signing secret, this once. */
  async create(caller: Caller, request: NewSubscription) {
    const subscription = await this.webhooks.subscribe(caller.tenant, request);
    return { ...publicView(subscription), secret: subscription.secret };
  }

  async list(caller: Caller) {
    return { subscriptions: (await this.store.subscriptions(caller.tenant)).map(publicView) };
  }

  async one(caller: Caller, id: string) {
    const subscription = (await this.store.subscriptions(caller.tenant, false)).find(
      (candidate) => candidate.id === id,
    );
    if (!subscription) throw new LedgerProblem('WEBHOOK_NOT_FOUND', 'no subscription of this tenant has this id');
    return publicView(subscription);
  }

  rotateSecret(caller: Caller, id: string, overlapSeconds: number | undefined) {
    return this.webhooks.rotateSecret(caller.tenant, id, overlapSeconds);
  }

  async remove(caller: Caller, id: string) {
    if (!(await this.store.deactivate(caller.tenant, id)))
      throw new LedgerProblem('WEBHOOK_NOT_FOUND', 'no active subscription of this tenant has this id');
    const subscription = (await this.store.subscriptions(caller.tenant, false)).find(
      (candidate) => candidate.id === id,
    ) as Subscription;
    return publicView(subscription);
  }

  async resend(caller: Caller, id: string) {
    return this.deliveryView(await this.webhooks.resend(caller.tenant, id), caller, await this.urls(caller));
  }

  async sendTest(caller: Caller, id: string) {
    return this.deliveryView(await this.webhooks.sendTestEvent(caller.tenant, id), caller, await this.urls(caller));
  }

  /** The tenant's latest deliveries, newest first, and counts per status. */
  async deliveries(caller: Caller, query: DeliveryQuery) {
    const counts: Record<string, number> = { pending: 0, delivered: 0, failed: 0 };
    for (const row of await this.store.counts(caller.tenant)) counts[row.status] += row.count;
    const urls = await this.urls(caller);
    return {
      deliveries: (await this.store.deliveries(caller.tenant, { status: query.status, limit: query.limit })).map(
        (delivery) => this.deliveryView(delivery, caller, urls),
      ),
      counts,
    };
  }

  /** Where each subscription of the tenant sends, for an admin (docs/webhooks.md); nothing for other roles. */
  private async urls(caller: Caller): Promise<Map<string, string> | undefined> {
    if (caller.role !== 'admin') return undefined;
    return new Map(
      (await this.store.subscriptions(caller.tenant, false)).map((subscription) => [subscription.id, subscription.url]),
    );
  }

  /**
   * A delivery as readers see it: never its body. Where it goes and why an attempt failed say what
   * answers at the receiver's address (docs/webhooks.md): admins only.
   */
  private deliveryView(delivery: Delivery, caller: Caller, urls: Map<string, string> | undefined) {
    const {
      body: _body,
      tenant: _tenant,
      next_attempt_ms,
      last_error,
      seq: _seq,
      ...rest
    } = delivery as Delivery & { seq?: number };
    const admin = caller.role === 'admin';
    const url = admin ? urls?.get(delivery.subscription_id) : undefined;
    return {
      ...rest,
      ...(url !== undefined ? { url } : {}),
      ...(last_error !== undefined && admin ? { last_error } : {}),
      ...(delivery.status === 'pending' && next_attempt_ms > 0
        ? { next_attempt_at: new Date(next_attempt_ms).toISOString() }
        : {}),
    };
  }
}
