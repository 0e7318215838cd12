import { type LedgerEvent, readLedgerEvent } from '@recovery-ledger/core';
import type { ProjectedEvent } from './projection';

/**
 * A projected event read as one of the ledger's own events by the ledger's one event codec
 * (packages/core/src/domain/event-codec.ts), or undefined for a type this code does not know (a newer ledger
 * wrote it) or data of another shape. Old readers survive new events: projections skip what they
 * cannot read instead of throwing.
 */
export function asLedgerEvent(event: ProjectedEvent): LedgerEvent | undefined {
  return readLedgerEvent(event);
}
