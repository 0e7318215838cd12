import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Post, Query } from '@nestjs/common';
import {
  ApiAcceptedResponse,
  ApiBody,
  ApiCreatedResponse,
  ApiOkResponse,
  ApiOperation,
  ApiQuery,
  ApiTags,
} from '@nestjs/swagger';
import { RequireAccess } from '../auth/access';
import { LedgerProblem } from '@recovery-ledger/core';
import { CallerParam, type Caller } from './caller';
import { optionalInteger } from './operation-ref';
import { NOTIFICATION_KINDS, type NotificationKind } from '../webhooks/notification-rules';
import { WebhookService, type NewSubscription } from '../webhooks/webhook.service';
import {
  WEBHOOK_STORE,
  type Delivery,
  type DeliveryStatus,
  type Subscription,
  type WebhookStore,
} from '../webhooks/webhook-store.port';
import {
  NewSubscriptionDto,
  SubscriptionDto,
  RotateSecretDto,
  RotatedSecretDto,
  CreatedSubscriptionDto,
  SubscriptionListDto,
  DeliveryDto,
  DeliveryListDto,
} from './dto/webhooks.dto';

const URL_MAX = 2048;

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

/** The body of a new subscription, checked field by field; a bad one names its field. */
function parseSubscription(body: unknown): NewSubscription {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new LedgerProblem('BAD_REQUEST', 'the body must be a JSON object');
  const { url, kinds, unknown_after_ms, premature_refusals, ...rest } = body as Record<string, unknown>;
  const unknownField = Object.keys(rest)[0];
  if (unknownField !== undefined)
    throw new LedgerProblem('BAD_REQUEST', `${unknownField} is not a field of a subscription`, { field: unknownField });
  let parsed: URL | undefined;
  try {
    parsed = typeof url === 'string' && url.length <= URL_MAX ? new URL(url) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.username || parsed.password) {
    throw new LedgerProblem(
      'BAD_REQUEST',
      `url must be an http or https URL without credentials, at most ${URL_MAX} characters`,
      { field: 'url' },
    );
  }
  if (
    kinds !== undefined &&
    (!Array.isArray(kinds) || kinds.some((kind) => !(NOTIFICATION_KINDS as readonly unknown[]).includes(kind)))
  ) {
    throw new LedgerProblem('BAD_REQUEST', `kinds must be a list of ${NOTIFICATION_KINDS.join(', ')}`, {
      field: 'kinds',
    });
  }
  const integer = (value: unknown, field: string, min: number, max: number) =>
    value === undefined ? undefined : optionalInteger(typeof value === 'number' ? String(value) : '-', field, min, max);
  return {
    url: parsed.toString(),
    ...(kinds === undefined ? {} : { kinds: kinds as NotificationKind[] }),
    ...(unknown_after_ms === undefined
      ? {}
      : { unknown_after_ms: integer(unknown_after_ms, 'unknown_after_ms', 0, 30 * 86_400_000) }),
    ...(premature_refusals === undefined
      ? {}
      : { premature_refusals: integer(premature_refusals, 'premature_refusals', 1, 1000) }),
  };
}

/**
 * Webhook subscriptions, per tenant, configured by an admin; deliveries readable by any key of the
 * tenant (no secret and no body in them; why an attempt failed to admins only), so the console shows
 * what was sent and what failed.
 */
@ApiTags('webhooks')
@Controller('v1')
export class WebhooksController {
  constructor(
    @Inject(WebhookService) private readonly webhooks: WebhookService,
    @Inject(WEBHOOK_STORE) private readonly store: WebhookStore,
  ) {}

  @Post('admin/webhooks')
  @HttpCode(201)
  @RequireAccess('admin')
  @ApiOperation({
    summary: "Subscribe a URL to the tenant's notifications; the answer carries the signing secret, once.",
  })
  @ApiBody({ type: NewSubscriptionDto })
  @ApiCreatedResponse({ type: CreatedSubscriptionDto })
  async create(@CallerParam() caller: Caller, @Body() body: unknown) {
    const subscription = await this.webhooks.subscribe(caller.tenant, parseSubscription(body));
    return { ...publicView(subscription), secret: subscription.secret };
  }

  @Get('admin/webhooks')
  @RequireAccess('admin')
  @ApiOperation({ summary: "The tenant's active subscriptions (secrets are never listed)." })
  @ApiOkResponse({ type: SubscriptionListDto })
  list(@CallerParam() caller: Caller) {
    return { subscriptions: this.store.subscriptions(caller.tenant).map(publicView) };
  }

  @Get('admin/webhooks/:id')
  @RequireAccess('admin')
  @ApiOperation({
    summary: 'One subscription of the tenant, active or not; a disabled one says why (secrets are never shown).',
  })
  @ApiOkResponse({ type: SubscriptionDto })
  one(@CallerParam() caller: Caller, @Param('id') id: string) {
    const subscription = this.store.subscriptions(caller.tenant, false).find((candidate) => candidate.id === id);
    if (!subscription) throw new LedgerProblem('WEBHOOK_NOT_FOUND', 'no subscription of this tenant has this id');
    return publicView(subscription);
  }

  @Post('admin/webhooks/:id/rotate-secret')
  @HttpCode(200)
  @RequireAccess('admin')
  @ApiOperation({
    summary: 'A new signing secret, shown once; the replaced one keeps signing beside it for the overlap.',
  })
  @ApiBody({ type: RotateSecretDto, required: false })
  @ApiOkResponse({ type: RotatedSecretDto })
  rotate(@CallerParam() caller: Caller, @Param('id') id: string, @Body() body: unknown) {
    const fields = body === undefined || body === null ? {} : body;
    if (typeof fields !== 'object' || Array.isArray(fields))
      throw new LedgerProblem('BAD_REQUEST', 'the body must be a JSON object');
    const { overlap_seconds, ...rest } = fields as Record<string, unknown>;
    const unknownField = Object.keys(rest)[0];
    if (unknownField !== undefined)
      throw new LedgerProblem('BAD_REQUEST', `${unknownField} is not a field of a rotation`, { field: unknownField });
    const overlap =
      overlap_seconds === undefined
        ? undefined
        : optionalInteger(
            typeof overlap_seconds === 'number' ? String(overlap_seconds) : '-',
            'overlap_seconds',
            0,
            7 * 86_400,
          );
    return this.webhooks.rotateSecret(caller.tenant, id, overlap);
  }

  @Delete('admin/webhooks/:id')
  @RequireAccess('admin')
  @ApiOperation({ summary: 'End a subscription: nothing more is delivered to it, pending deliveries included.' })
  @ApiOkResponse({ type: SubscriptionDto })
  remove(@CallerParam() caller: Caller, @Param('id') id: string) {
    if (!this.store.deactivate(caller.tenant, id))
      throw new LedgerProblem('WEBHOOK_NOT_FOUND', 'no active subscription of this tenant has this id');
    const subscription = this.store
      .subscriptions(caller.tenant, false)
      .find((candidate) => candidate.id === id) as Subscription;
    return publicView(subscription);
  }

  @Post('admin/webhooks/deliveries/:id/resend')
  @HttpCode(202)
  @RequireAccess('admin')
  @ApiOperation({
    summary:
      'Send one delivery again, under its own id: due now, its attempts kept (one more attempt for a delivery that was given up).',
  })
  @ApiAcceptedResponse({ type: DeliveryDto })
  resend(@CallerParam() caller: Caller, @Param('id') id: string) {
    return this.deliveryView(this.webhooks.resend(caller.tenant, id), caller);
  }

  @Post('admin/webhooks/:id/test')
  @HttpCode(202)
  @RequireAccess('admin')
  @ApiOperation({ summary: 'Queue a signed `webhook.test` delivery to one active subscription.' })
  @ApiAcceptedResponse({ type: DeliveryDto })
  sendTest(@CallerParam() caller: Caller, @Param('id') id: string) {
    return this.deliveryView(this.webhooks.sendTestEvent(caller.tenant, id), caller);
  }

  @Get('webhooks/deliveries')
  @RequireAccess('read')
  @ApiOperation({ summary: "The tenant's latest webhook deliveries, newest first, and counts per status." })
  @ApiQuery({ name: 'status', required: false, enum: ['pending', 'delivered', 'failed'] })
  @ApiQuery({ name: 'limit', required: false, type: Number })
  @ApiOkResponse({ type: DeliveryListDto })
  deliveries(@CallerParam() caller: Caller, @Query('status') status?: string, @Query('limit') limitRaw?: string) {
    if (status !== undefined && !['pending', 'delivered', 'failed'].includes(status)) {
      throw new LedgerProblem('BAD_REQUEST', 'status must be one of pending, delivered, failed', { field: 'status' });
    }
    const limit = optionalInteger(limitRaw, 'limit', 1, 500) ?? 50;
    const counts: Record<string, number> = { pending: 0, delivered: 0, failed: 0 };
    for (const row of this.store.counts(caller.tenant)) counts[row.status] += row.count;
    const urls =
      caller.role === 'admin'
        ? new Map(
            this.store.subscriptions(caller.tenant, false).map((subscription) => [subscription.id, subscription.url]),
          )
        : undefined;
    return {
      deliveries: this.store
        .deliveries(caller.tenant, { status: status as DeliveryStatus | undefined, limit })
        .map((delivery) => this.deliveryView(delivery, caller, urls)),
      counts,
    };
  }

  /**
   * A delivery as readers see it: never its body. Where it goes and why an attempt failed say what
   * answers at the receiver's address (docs/webhooks.md): admins only.
   */
  private deliveryView(delivery: Delivery, caller: Caller, urls?: Map<string, string>) {
    const {
      body: _body,
      tenant: _tenant,
      next_attempt_ms,
      last_error,
      seq: _seq,
      ...rest
    } = delivery as Delivery & { seq?: number };
    const admin = caller.role === 'admin';
    const url = admin
      ? (urls ?? new Map(this.store.subscriptions(caller.tenant, false).map((each) => [each.id, each.url]))).get(
          delivery.subscription_id,
        )
      : undefined;
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
