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
import { WebhookSubscriptions } from '../webhooks/webhook-subscriptions';
import { CallerParam, type Caller } from './caller';
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
import { readDeliveryQuery, readNewSubscription, readRotation } from './webhooks.reader';

/** Webhook subscriptions and deliveries (docs/webhooks.md): each body read by ./webhooks.reader.ts. */
@ApiTags('webhooks')
@Controller('v1')
export class WebhooksController {
  constructor(@Inject(WebhookSubscriptions) private readonly webhooks: WebhookSubscriptions) {}

  @Post('admin/webhooks')
  @HttpCode(201)
  @RequireAccess('admin')
  @ApiOperation({
    summary: "Subscribe a URL to the tenant's notifications; the answer carries the signing secret, once.",
  })
  @ApiBody({ type: NewSubscriptionDto })
  @ApiCreatedResponse({ type: CreatedSubscriptionDto })
  create(@CallerParam() caller: Caller, @Body() body: unknown) {
    return this.webhooks.create(caller, readNewSubscription(body));
  }

  @Get('admin/webhooks')
  @RequireAccess('admin')
  @ApiOperation({ summary: "The tenant's active subscriptions (secrets are never listed)." })
  @ApiOkResponse({ type: SubscriptionListDto })
  list(@CallerParam() caller: Caller) {
    return this.webhooks.list(caller);
  }

  @Get('admin/webhooks/:id')
  @RequireAccess('admin')
  @ApiOperation({
    summary: 'One subscription of the tenant, active or not; a disabled one says why (secrets are never shown).',
  })
  @ApiOkResponse({ type: SubscriptionDto })
  one(@CallerParam() caller: Caller, @Param('id') id: string) {
    return this.webhooks.one(caller, id);
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
    return this.webhooks.rotateSecret(caller, id, readRotation(body));
  }

  @Delete('admin/webhooks/:id')
  @RequireAccess('admin')
  @ApiOperation({ summary: 'End a subscription: nothing more is delivered to it, pending deliveries included.' })
  @ApiOkResponse({ type: SubscriptionDto })
  remove(@CallerParam() caller: Caller, @Param('id') id: string) {
    return this.webhooks.remove(caller, id);
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
    return this.webhooks.resend(caller, id);
  }

  @Post('admin/webhooks/:id/test')
  @HttpCode(202)
  @RequireAccess('admin')
  @ApiOperation({ summary: 'Queue a signed `webhook.test` delivery to one active subscription.' })
  @ApiAcceptedResponse({ type: DeliveryDto })
  sendTest(@CallerParam() caller: Caller, @Param('id') id: string) {
    return this.webhooks.sendTest(caller, id);
  }

  @Get('webhooks/deliveries')
  @RequireAccess('read')
  @ApiOperation({ summary: "The tenant's latest webhook deliveries, newest first, and counts per status." })
  @ApiQuery({ name: 'status', required: false, enum: ['pending', 'delivered', 'failed'] })
  @ApiQuery({ name: 'limit', required: false, type: Number })
  @ApiOkResponse({ type: DeliveryListDto })
  deliveries(@CallerParam() caller: Caller, @Query('status') status?: string, @Query('limit') limit?: string) {
    return this.webhooks.deliveries(caller, readDeliveryQuery(status, limit));
  }
}
