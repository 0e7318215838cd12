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

export type VerifyResult = { ok: true; timestamp: number } | { ok: false; reason: 'malformed' | 'no_match' | 'too_old' };

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
