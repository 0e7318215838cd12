import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Webhook signatures the way Stripe signs its webhooks: the header
 * `Recovery-Ledger-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">` with the
 * subscription's secret. The timestamp is inside what is signed, so a receiver that refuses old
 * timestamps (300 s, Stripe's default tolerance) refuses a replayed request; several `v1=` entries
 * may appear while a secret is being rotated, and one match is enough.
 */
export const SIGNATURE_HEADER = 'Recovery-Ledger-Signature';
export const DEFAULT_TOLERANCE_SECONDS = 300;

export function signPayload(secret: string, timestamp: number, body: string): string {
  return createHmac('sha256', secret).update(`${timestamp}.${body}`, 'utf8').digest('hex');
}

export function signatureHeader(secret: string, body: string, timestamp: number): string {
  return `t=${timestamp},v1=${signPayload(secret, timestamp, body)}`;
}

export type VerifyResult =
  { ok: true; timestamp: number } | { ok: false; reason: 'malformed' | 'no_match' | 'too_old' };

/** What a receiver does (docs/webhooks.md carries the same steps for receivers in other languages). */
export function verifySignature(
  header: string | undefined,
  body: string,
  secret: string,
  { toleranceSeconds = DEFAULT_TOLERANCE_SECONDS, nowSeconds = Math.floor(Date.now() / 1000) } = {},
): VerifyResult {
  if (!header) return { ok: false, reason: 'malformed' };
  let timestamp: number | undefined;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const [key, value] = part.split('=', 2).map((text) => text.trim());
    if (key === 't' && /^\d+$/.test(value ?? '')) timestamp = Number(value);
    else if (key === 'v1' && /^[0-9a-f]{64}$/.test(value ?? '')) signatures.push(value);
  }
  if (timestamp === undefined || signatures.length === 0) return { ok: false, reason: 'malformed' };
  const expected = Buffer.from(signPayload(secret, timestamp, body), 'hex');
  const matches = signatures.some((candidate) => timingSafeEqual(Buffer.from(candidate, 'hex'), expected));
  if (!matches) return { ok: false, reason: 'no_match' };
  if (Math.abs(nowSeconds - timestamp) > toleranceSeconds) return { ok: false, reason: 'too_old' };
  return { ok: true, timestamp };
}

/**
 * Standard Webhooks (https://www.standardwebhooks.com, spec "Signature scheme"), sent beside the
 * header above: `webhook-id` (the delivery's id, the same on every retry), `webhook-timestamp` (unix
 * seconds) and `webhook-signature`, `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` keyed with
 * the base64 part of the `whsec_` secret. Several signatures are separated by spaces (a rotation's
 * overlap, docs/webhooks.md "Rotating a secret"); a receiver accepts when one matches.
 */
export const STANDARD_SECRET_PREFIX = 'whsec_';

/** The HMAC key of a `whsec_` secret: its base64 part, decoded (base64url as well, for older secrets). */
export function standardKey(secret: string): Buffer {
  return Buffer.from(
    secret.startsWith(STANDARD_SECRET_PREFIX) ? secret.slice(STANDARD_SECRET_PREFIX.length) : secret,
    'base64',
  );
}

export function standardSignature(secret: string, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', standardKey(secret)).update(`${id}.${timestamp}.${body}`, 'utf8').digest('base64')}`;
}

/** Every header a delivery carries to prove it: both schemes, each signed with every secret given. */
export function signedHeaders(
  secrets: readonly string[],
  id: string,
  body: string,
  timestamp: number,
): Record<string, string> {
  return {
    [SIGNATURE_HEADER]: [
      `t=${timestamp}`,
      ...secrets.map((secret) => `v1=${signPayload(secret, timestamp, body)}`),
    ].join(','),
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets.map((secret) => standardSignature(secret, id, timestamp, body)).join(' '),
  };
}
