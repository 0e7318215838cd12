import type { LedgerEvent } from '../src/domain/events';
import { isRecord, type ProjectedEvent } from './projection';

/**
 * A projected event read as one of the ledger's own events, or undefined for a type this code does
 * not know (a newer ledger wrote it) or data that is not an object. Old readers survive new events:
 * projections skip what they cannot read instead of throwing.
 */
export function asLedgerEvent(event: ProjectedEvent): LedgerEvent | undefined {
  if (!isRecord(event.data)) return undefined;
  switch (event.type) {
    case 'StepPlanned':
    case 'AttemptDispatched':
    case 'EnvelopeRecorded':
    case 'VerificationRecorded':
    case 'ApprovalRecorded':
    case 'TransitionRecorded':
    case 'DispatchRefused':
      return { type: event.type, data: event.data } as unknown as LedgerEvent;
    default:
      return undefined;
  }
}
