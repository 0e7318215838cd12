import { LedgerProblem } from '@recovery-ledger/core';
import { NOTIFICATION_KINDS, type NotificationKind } from '../webhooks/notification-rules';
import type { DeliveryQuery } from '../webhooks/webhook-subscriptions';
import type { DeliveryStatus } from '../webhooks/webhook-store.port';
import type { NewSubscription } from '../webhooks/webhook.service';
import { optionalInteger } from './operation-ref';
import { integerSchema, readFieldsAgainstSchema, type FieldSchema } from './submit-body.reader';

/**
 * The webhook routes' bodies and query (docs/webhooks.md), read by the schema reader every body of
 * the API goes through (./submit-body.reader.ts): a bad one is a 400 naming its field.
 */

const URL_MAX = 2048;
const DELIVERY_STATUSES: readonly DeliveryStatus[] = ['pending', 'delivered', 'failed'];

const SUBSCRIPTION_SCHEMA: FieldSchema = {
  type: 'object',
  unknownKeyReason: 'is not a field of a subscription',
  properties: {
    url: {
      type: 'string',
      format: 'http-url',
      maxLength: URL_MAX,
      reason: `must be an http or https URL without credentials, at most ${URL_MAX} characters`,
    },
    kinds: {
      type: 'array',
      items: { enum: NOTIFICATION_KINDS },
      reason: `must be a list of ${NOTIFICATION_KINDS.join(', ')}`,
    },
    unknown_after_ms: integerSchema(0, 30 * 86_400_000),
    premature_refusals: integerSchema(1, 1000),
  },
  required: ['url'],
};

const ROTATION_SCHEMA: FieldSchema = {
  type: 'object',
  unknownKeyReason: 'is not a field of a rotation',
  properties: { overlap_seconds: integerSchema(0, 7 * 86_400) },
};

function objectBody(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new LedgerProblem('BAD_REQUEST', 'the body must be a JSON object');
  return body as Record<string, unknown>;
}

/** `POST /v1/admin/webhooks`: a new subscription, its URL as the URL parser writes it. */
export function readNewSubscription(body: unknown): NewSubscription {
  const fields = objectBody(body);
  readFieldsAgainstSchema(SUBSCRIPTION_SCHEMA, fields);
  const { url, kinds, unknown_after_ms, premature_refusals } = fields;
  return {
    url: new URL(url as string).toString(),
    ...(kinds === undefined ? {} : { kinds: kinds as NotificationKind[] }),
    ...(unknown_after_ms === undefined ? {} : { unknown_after_ms: unknown_after_ms as number }),
    ...(premature_refusals === undefined ? {} : { premature_refusals: premature_refusals as number }),
  };
}

/** `POST /v1/admin/webhooks/{id}/rotate-secret`: the overlap, when the (optional) body names one. */
export function readRotation(body: unknown): number | undefined {
  const fields = objectBody(body === undefined || body === null ? {} : body);
  readFieldsAgainstSchema(ROTATION_SCHEMA, fields);
  return fields.overlap_seconds as number | undefined;
}

/** `GET /v1/webhooks/deliveries`: `status` one of the delivery statuses, `limit` 1–500 (default 50). */
export function readDeliveryQuery(status: string | undefined, limit: string | undefined): DeliveryQuery {
  if (status !== undefined && !(DELIVERY_STATUSES as readonly string[]).includes(status)) {
    throw new LedgerProblem('BAD_REQUEST', `status must be one of ${DELIVERY_STATUSES.join(', ')}`, {
      field: 'status',
    });
  }
  return {
    ...(status === undefined ? {} : { status: status as DeliveryStatus }),
    limit: optionalInteger(limit, 'limit', 1, 500) ?? 50,
  };
}
