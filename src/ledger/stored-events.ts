import {
  decodeRecordedEvent,
  encodeLedgerEvent,
  EVENT_SCHEMA_VERSION,
  EventShapeError,
  type LedgerEvent,
  type RecordedEvent,
  type SubmitContext,
  type SubmittedEvent,
} from '@recovery-ledger/core';
import { StoreIntegrityError, type EventMetadata, type NewEvent } from '../store/event-store.port';
import { derivedEventId, submittedHash } from './event-ids';

/**
 * The ledger's two crossings of the event codec (packages/core/src/domain/event-codec.ts): a stored event into
 * the domain's RecordedEvent for a fold, and a decision's events into what the store appends.
 */

/** An event to append before the hash chain seals it (src/integrity/hash-chain.ts, sealEvents). */
export type UnsealedEvent = Omit<NewEvent, 'metadata'> & { metadata: Omit<EventMetadata, 'hash' | 'prev_hash'> };

/**
 * A stored event as the domain folds it. A stored event of a shape the ledger never writes is an
 * integrity fault of the stream, not a bug to answer 500 with.
 */
export function toRecorded(event: NewEvent & { revision?: number; stream?: string }): RecordedEvent {
  try {
    return decodeRecordedEvent({ ...event, recorded_at: event.metadata.recorded_at });
  } catch (error) {
    if (error instanceof EventShapeError)
      throw new StoreIntegrityError(event.stream, `an event of a shape the ledger never writes: ${error.message}`);
    throw error;
  }
}

/**
 * A decision's events as the store keeps them. The fact keeps the runtime's event id; what it
 * causes gets ids derived from it. An event the codec refuses is never written: the ledger would
 * refuse its own stream when it next read it.
 */
export function toNewEvents(
  events: readonly LedgerEvent[],
  submitted: SubmittedEvent,
  context: SubmitContext,
  now: string,
): UnsealedEvent[] {
  const base: Omit<EventMetadata, 'hash' | 'prev_hash'> = {
    schema_version: EVENT_SCHEMA_VERSION,
    recorded_at: now,
    actor: context.actor,
    tenant: context.tenant,
    operation_ref: context.operationRef,
    ...(context.traceparent ? { traceparent: context.traceparent } : {}),
    ...(context.tracestate ? { tracestate: context.tracestate } : {}),
  };
  // `decide` puts the fact (or the DispatchRefused that stands for it) first.
  return events.map((event, index) => {
    const isFirst = index === 0;
    const eventId = isFirst ? submitted.event_id : derivedEventId(submitted.event_id, index);
    // Who acted is evidence of the fact itself, not of what the ledger derived from it.
    const metadata = isFirst
      ? { ...base, ...(context.lease ? { lease: context.lease } : {}), submitted_hash: submittedHash(submitted) }
      : { ...base, causation_event_id: submitted.event_id };
    const { type, data } = encoded(event, eventId);
    return { event_id: eventId, type, data, metadata };
  });
}

function encoded(event: LedgerEvent, eventId: string) {
  try {
    return encodeLedgerEvent(event, eventId);
  } catch (error) {
    if (error instanceof EventShapeError)
      throw new StoreIntegrityError(undefined, `an event of a shape the ledger never writes: ${error.message}`);
    throw error;
  }
}
