import { createHash } from 'node:crypto';
import { canonicalJson, type SubmittedEvent } from '@recovery-ledger/core';

/**
 * Derived events get ids computed from the submitted fact's id, so that deciding the same fact
 * again (a retried request, a replay) produces the same ids and the store's idempotency holds.
 * Formatted as an RFC 9562 version 8 (custom) UUID.
 */
export function derivedEventId(causeEventId: string, index: number): string {
  const hex = createHash('sha256').update(`${causeEventId}#${index}`).digest('hex');
  const variant = ((parseInt(hex[16], 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Hash of what was submitted, to tell an honest resubmission from an id reused for another fact. */
export function submittedHash(event: SubmittedEvent): string {
  return sha256Hex(canonicalJson({ type: event.type, data: event.data }));
}
