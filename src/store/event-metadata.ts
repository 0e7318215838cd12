import type { EventMetadata } from './event-store.port';

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const isString = (value: unknown): value is string => typeof value === 'string';
const isInteger = (value: unknown): value is number => Number.isSafeInteger(value);
const optional = (value: unknown, holds: (value: unknown) => boolean) => value === undefined || holds(value);

const isLease = (value: unknown) =>
  isObject(value) &&
  isString(value.lease_id) &&
  isString(value.holder) &&
  typeof value.current === 'boolean' &&
  optional(value.took_over_from, isString);

/**
 * The metadata every stored event carries (event-store.port.ts), checked field by field and kept as
 * it is: the one reading of stored metadata, used by both adapters and the archive reader, so a row
 * without the fields the ledger writes is refused where it is read rather than cast into shape.
 */
export function isEventMetadata(value: unknown): value is EventMetadata {
  return (
    isObject(value) &&
    isInteger(value.schema_version) &&
    isString(value.recorded_at) &&
    isString(value.actor) &&
    isString(value.tenant) &&
    isString(value.operation_ref) &&
    isString(value.prev_hash) &&
    isString(value.hash) &&
    optional(value.causation_event_id, isString) &&
    optional(value.traceparent, isString) &&
    optional(value.tracestate, isString) &&
    optional(value.submitted_hash, isString) &&
    optional(value.lease, isLease)
  );
}
