import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { NOTIFICATION_KINDS } from '../../webhooks/notification-rules';
import { TEST_EVENT_KIND } from '../../webhooks/webhook-store.port';

/**
 * The OpenAPI shapes of webhook subscriptions and deliveries (their bodies and answers), for the
 * document only: src/http/webhooks.controller.ts declares the routes.
 */
export class NewSubscriptionDto {
  @ApiProperty({ description: 'Where deliveries are POSTed (http or https).' }) url!: string;
  @ApiPropertyOptional({ enum: NOTIFICATION_KINDS, isArray: true, description: 'Default: every kind.' })
  kinds?: string[];
  @ApiPropertyOptional({
    description: 'An unknown outcome unresolved this long is notified (default 900000, 15 minutes).',
  })
  unknown_after_ms?: number;
  @ApiPropertyOptional({
    description: 'Premature not_found lookups on one operation, in a row, that are notified (default 3).',
  })
  premature_refusals?: number;
}

export class SubscriptionDto {
  @ApiProperty() id!: string;
  @ApiProperty() url!: string;
  @ApiProperty({ enum: NOTIFICATION_KINDS, isArray: true }) kinds!: string[];
  @ApiProperty() unknown_after_ms!: number;
  @ApiProperty() premature_refusals!: number;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
  @ApiProperty() active!: boolean;
  @ApiPropertyOptional({
    format: 'date-time',
    description: 'During a rotation: the replaced secret signs beside the new one until then.',
  })
  previous_secret_until?: string;
  @ApiPropertyOptional({
    description: 'Why the subscription was disabled without an admin ending it (the receiver answered 410 Gone).',
  })
  disabled_reason?: string;
  @ApiPropertyOptional({ format: 'date-time' }) disabled_at?: string;
}

export class RotateSecretDto {
  @ApiPropertyOptional({
    description: 'How long the replaced secret keeps signing beside the new one (default 86400, at most 604800).',
  })
  overlap_seconds?: number;
}

export class RotatedSecretDto {
  @ApiProperty({ description: 'The new signing secret, shown this once.' }) secret!: string;
  @ApiProperty({ format: 'date-time' }) previous_secret_until!: string;
}

export class CreatedSubscriptionDto extends SubscriptionDto {
  @ApiProperty({ description: 'The signing secret, shown this once.' }) secret!: string;
}

export class SubscriptionListDto {
  @ApiProperty({ type: [SubscriptionDto] }) subscriptions!: SubscriptionDto[];
}

export class DeliveryDto {
  @ApiProperty() id!: string;
  @ApiProperty() subscription_id!: string;
  @ApiProperty({ enum: [...NOTIFICATION_KINDS, TEST_EVENT_KIND] }) kind!: string;
  @ApiProperty({ description: 'Empty for a test event.' }) operation_ref!: string;
  @ApiPropertyOptional({ description: "The subscription's URL the delivery goes to: shown to admin keys only." })
  url?: string;
  @ApiProperty({ enum: ['pending', 'delivered', 'failed'] }) status!: string;
  @ApiProperty() attempts!: number;
  @ApiPropertyOptional() last_status?: number;
  @ApiPropertyOptional({
    description:
      "Why the last attempt failed (the receiver's answer, or why it could not be reached): shown to admin keys only.",
  })
  last_error?: string;
  @ApiPropertyOptional({ format: 'date-time' }) next_attempt_at?: string;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
  @ApiPropertyOptional({ format: 'date-time' }) delivered_at?: string;
}

export class DeliveryListDto {
  @ApiProperty({ type: [DeliveryDto] }) deliveries!: DeliveryDto[];
  @ApiProperty({
    type: 'object',
    additionalProperties: { type: 'integer' },
    description: 'Deliveries of the tenant per status.',
  })
  counts!: Record<string, number>;
}
