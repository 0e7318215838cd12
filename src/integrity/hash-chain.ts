import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { canonicalJson } from '@recovery-ledger/core';
import type { EventMetadata, NewEvent, StoredEvent } from '../store/event-store.port';

/**
 * The hash chain that proves no one rewrote a stream's history.
 *
 *   hash(e_n) = SHA-256_hex( prev_hash || "\n" || canonicalJson({ stream, revision, event_id, type, data, metadata }) )
 *
 * where `metadata` excludes `hash` itself, `prev_hash` is the hash of e_{n-1} (GENESIS_HASH, 64 zeros,
 * for revision 0), and canonicalJson sorts keys (packages/core/src/shared/canonical-json.ts). The global position
 * is not covered: it is assigned by the store and differs after an export/import.
 */
export const GENESIS_HASH = '0'.repeat(64);

export interface ChainInput {
  stream: string;
  revision: number;
  event_id: string;
  type: string;
  data: unknown;
  metadata: Omit<EventMetadata, 'hash'>;
}

export function computeEventHash(input: ChainInput): string {
  const { hash: _ignored, ...metadata } = input.metadata as EventMetadata;
  const body = canonicalJson({
    stream: input.stream,
    revision: input.revision,
    event_id: input.event_id,
    type: input.type,
    data: input.data,
    metadata,
  });
  return createHash('sha256').update(`${metadata.prev_hash}\n${body}`).digest('hex');
}

/** Seals events for appending after `previous` (the stream's last event, if any). */
export function sealEvents(
  stream: string,
  previous: { revision: number; hash: string } | undefined,
  events: Array<Omit<NewEvent, 'metadata'> & { metadata: Omit<EventMetadata, 'hash' | 'prev_hash'> }>,
): NewEvent[] {
  let prevHash = previous?.hash ?? GENESIS_HASH;
  let revision = previous?.revision ?? -1;
  return events.map((event) => {
    revision += 1;
    const metadata = { ...event.metadata, prev_hash: prevHash };
    const hash = computeEventHash({
      stream,
      revision,
      event_id: event.event_id,
      type: event.type,
      data: event.data,
      metadata,
    });
    prevHash = hash;
    return { ...event, metadata: { ...metadata, hash } };
  });
}

export interface ChainBreak {
  stream: string;
  revision: number;
  event_id: string;
  reason: 'hash_mismatch' | 'prev_hash_mismatch' | 'revision_gap' | 'position_order';
}

/**
 * Re-computes a stream's chain; answers the first event that does not match, if any. With
 * `verified` (a prefix already re-hashed, up to and including that revision) only the events after
 * it are re-hashed; the prefix is still checked for its length, order and last hash.
 *
 * With `startAt`, `events` is the stream's tail from that revision (after a snapshot): the first
 * event's link to the one before it is taken as it stands, and the caller ties the first event's
 * hash to what it trusts (the snapshot's head hash); everything from it on is checked as above.
 */
export function verifyChain(
  events: readonly StoredEvent[],
  verified?: { revision: number; hash: string },
  startAt = 0,
): ChainBreak | undefined {
  let prevHash = startAt === 0 ? GENESIS_HASH : (events[0]?.metadata.prev_hash ?? GENESIS_HASH);
  let expectedRevision = startAt;
  let prevPosition = 0;
  const skipUpTo =
    verified && events[verified.revision - startAt]?.metadata.hash === verified.hash ? verified.revision : -1;
  for (const event of events) {
    if (
      event.revision <= skipUpTo &&
      event.revision === expectedRevision &&
      event.position > prevPosition &&
      event.metadata.prev_hash === prevHash
    ) {
      prevHash = event.metadata.hash;
      prevPosition = event.position;
      expectedRevision += 1;
      continue;
    }
    const at = { stream: event.stream, revision: event.revision, event_id: event.event_id };
    if (event.revision !== expectedRevision) return { ...at, reason: 'revision_gap' };
    // A stream is appended in order, so its events stand in the log in revision order too.
    if (event.position <= prevPosition) return { ...at, reason: 'position_order' };
    prevPosition = event.position;
    if (event.metadata.prev_hash !== prevHash) return { ...at, reason: 'prev_hash_mismatch' };
    if (computeEventHash(event) !== event.metadata.hash) return { ...at, reason: 'hash_mismatch' };
    prevHash = event.metadata.hash;
    expectedRevision += 1;
  }
  return undefined;
}

/**
 * The log chain, over every event in global log order (the anchor of docs/reliability.md):
 *
 *   log_hash_n = SHA-256_hex( log_hash_{n-1} || "\n" || JSON.stringify([stream, revision, hash(e_n)]) )
 *
 * starting from GENESIS_HASH. Each event's own hash already covers its content, so this chain only
 * has to fix which events stand in the log and in what order: a stream deleted, a tail cut, a
 * suffix re-hashed or two events swapped all change it.
 */
export function nextLogHash(previous: string, event: { stream: string; revision: number; hash: string }): string {
  // An array of a string, a number and a string serialises one way only: no key order to fix.
  return createHash('sha256')
    .update(`${previous}\n${JSON.stringify([event.stream, event.revision, event.hash])}`)
    .digest('hex');
}

/** The anchor's signature under a key kept outside the store: only its holder can make one. */
export function signAnchor(key: string, anchor: { position: number; events: number; log_hash: string }): string {
  return createHmac('sha256', key).update(`${anchor.position}\n${anchor.events}\n${anchor.log_hash}`).digest('hex');
}

export function anchorSignatureHolds(
  key: string,
  anchor: { position: number; events: number; log_hash: string; signature?: string },
): boolean {
  if (!anchor.signature || !/^[0-9a-f]{64}$/.test(anchor.signature)) return false;
  return timingSafeEqual(Buffer.from(signAnchor(key, anchor), 'hex'), Buffer.from(anchor.signature, 'hex'));
}
