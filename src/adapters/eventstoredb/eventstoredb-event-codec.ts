import { START, jsonEvent, type EventData, type ReadPosition, type ResolvedEvent } from '@eventstore/db-client';
import type { JsonObject, JsonValue, NewEvent, StoredEvent } from '../../store/event-store.port';
import { isEventMetadata } from '../../store/event-metadata';
import { BESIDE_THE_LOG_PREFIXES } from '../../store/stream-names';

/** An event the adapter will not send: it would not come back as it was given, or would not be sent at all. */
export class InvalidEventError extends TypeError {
  constructor(
    readonly path: string,
    detail: string,
  ) {
    super(path ? `${path}: ${detail}` : detail);
    this.name = 'InvalidEventError';
  }
}

/** Something read back that this adapter did not write, or a server older than it supports. */
export class UnexpectedStoredEventError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnexpectedStoredEventError';
  }
}

// Lower case only: the server parses ids as GUIDs and returns them lower-case, so an id spelled any
// other way would not be found again by the ledger's duplicate check (and would be appended twice).
const CANONICAL_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function validateStreamName(stream: string): void {
  if (typeof stream !== 'string' || stream.length === 0)
    throw new InvalidEventError('stream', 'must be a non-empty string');
  // `$` streams are the server's own; the adapter leaves them out of the global log it serves.
  if (stream.startsWith('$'))
    throw new InvalidEventError('stream', 'names starting with "$" are reserved for system streams');
}

/**
 * Validates an event and hands the client a fresh plain-JSON copy of its data and metadata. The
 * client calls JSON.stringify inside an async promise executor: a BigInt there throws where nobody
 * catches it and appendToStream never settles, and NaN, Dates or class instances would be stored as
 * something other than what was appended. All of that is refused here, synchronously, with the path.
 */
export function toEventData(event: NewEvent, index: number): EventData {
  const at = `events[${index}]`;
  if (typeof event.event_id !== 'string' || !CANONICAL_UUID.test(event.event_id)) {
    throw new InvalidEventError(`${at}.event_id`, 'must be a lower-case UUID (EventStoreDB returns ids in that form)');
  }
  if (typeof event.type !== 'string' || event.type.length === 0)
    throw new InvalidEventError(`${at}.type`, 'must be a non-empty string');
  if (event.type.startsWith('$'))
    throw new InvalidEventError(`${at}.type`, 'types starting with "$" are reserved for system events');
  const data = jsonCopy(event.data, `${at}.data`, []);
  if (!isPlainObject(data)) throw new InvalidEventError(`${at}.data`, 'must be a JSON object');
  const metadata = jsonCopy(event.metadata, `${at}.metadata`, []);
  if (!isPlainObject(metadata)) throw new InvalidEventError(`${at}.metadata`, 'must be a JSON object');
  return jsonEvent({ id: event.event_id, type: event.type, data, metadata });
}

function jsonCopy(value: unknown, path: string, ancestors: object[]): JsonValue {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (!Number.isFinite(value))
        throw new InvalidEventError(path, `${value} has no JSON form (it would be stored as null)`);
      return value;
    case 'bigint':
      throw new InvalidEventError(path, 'a BigInt has no JSON form; send it as a string');
    case 'object': {
      if (value === null) return null;
      if (ancestors.includes(value)) throw new InvalidEventError(path, 'circular reference');
      ancestors.push(value);
      try {
        if (Array.isArray(value)) {
          const items: JsonValue[] = [];
          for (let index = 0; index < value.length; index++) {
            if (value[index] === undefined)
              throw new InvalidEventError(
                `${path}[${index}]`,
                'undefined has no JSON form (it would be stored as null)',
              );
            items.push(jsonCopy(value[index], `${path}[${index}]`, ancestors));
          }
          return items;
        }
        const prototype = Object.getPrototypeOf(value) as unknown;
        if (prototype !== Object.prototype && prototype !== null) {
          const name = (value as { constructor?: { name?: string } }).constructor?.name ?? 'non-plain';
          throw new InvalidEventError(path, `a ${name} object is not plain JSON data`);
        }
        const copy: JsonObject = {};
        for (const [key, item] of Object.entries(value)) {
          // Absent optional fields: JSON.stringify leaves them out, and so does every adapter.
          if (item === undefined) continue;
          // defineProperty, so a "__proto__" key stays data and never becomes the copy's prototype.
          Object.defineProperty(copy, key, {
            value: jsonCopy(item, `${path}.${key}`, ancestors),
            enumerable: true,
            writable: true,
            configurable: true,
          });
        }
        return copy;
      } finally {
        ancestors.pop();
      }
    }
    default:
      throw new InvalidEventError(path, `a value of type ${typeof value} has no JSON form`);
  }
}

function isPlainObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
}

/**
 * Whether an event of `$all` belongs to the log the port serves: not a system stream or system
 * event (`$`-prefixed, which includes metadata streams and `$>` links), not one of the streams the
 * adapters keep beside the log (leases, the clock's time base), a JSON object like every
 * event the port appends (another application's binary event may share the database), and under
 * the prefix when one is asked for.
 */
export function isLedgerEvent(resolved: ResolvedEvent, streamPrefix?: string): boolean {
  const event = resolved.event;
  if (!event || event.streamId.startsWith('$') || event.type.startsWith('$')) return false;
  if (BESIDE_THE_LOG_PREFIXES.some((prefix) => event.streamId.startsWith(prefix))) return false;
  if (!event.isJson || !isPlainObject(event.data)) return false;
  return streamPrefix === undefined || event.streamId.startsWith(streamPrefix);
}

export function toStoredEvent(resolved: ResolvedEvent): StoredEvent {
  const event = resolved.event;
  if (!event) throw new UnexpectedStoredEventError('the server sent a link without its event');
  const where = `${event.streamId}@${event.revision}`;
  if (!event.isJson || !isPlainObject(event.data))
    throw new UnexpectedStoredEventError(`${where}: data is not a JSON object`);
  if (!isPlainObject(event.metadata)) throw new UnexpectedStoredEventError(`${where}: metadata is not a JSON object`);
  if (!isEventMetadata(event.metadata))
    throw new UnexpectedStoredEventError(`${where}: metadata lacks the fields the ledger writes`);
  return {
    stream: event.streamId,
    revision: toPortRevision(event.revision, where),
    position: toPortPosition(event.position?.commit ?? resolved.commitPosition, where),
    event_id: event.id,
    type: event.type,
    data: event.data,
    metadata: event.metadata,
  };
}

/** The $all commit position of a record, system or not; used to page through $all. */
export function allPositionOf(resolved: ResolvedEvent): bigint | undefined {
  return resolved.event?.position?.commit ?? resolved.commitPosition;
}

/**
 * The port's position is the $all commit position as a number. A log would need 8 PiB before it
 * stopped being a safe integer; 2^64-1 is what servers before 22.6 send on stream reads, which
 * carry no position there, and this adapter needs one.
 */
export function toPortPosition(commit: bigint | undefined, where: string): number {
  const position = commit === undefined ? Number.NaN : Number(commit);
  if (!Number.isSafeInteger(position) || position <= 0) {
    throw new UnexpectedStoredEventError(
      `${where}: $all position ${commit} is not a positive safe integer (EventStoreDB 22.6 or later is required)`,
    );
  }
  return position;
}

export function toPortRevision(revision: bigint, where: string): number {
  const value = Number(revision);
  if (!Number.isSafeInteger(value) || value < 0)
    throw new UnexpectedStoredEventError(`${where}: revision ${revision} is out of range`);
  return value;
}

/**
 * The port's `after: 0` means from the beginning; any other value is a position this adapter
 * reported. Events appended through gRPC are never in explicit transactions, so their commit and
 * prepare positions are equal and the pair is rebuilt from one number.
 */
export function toReadPosition(after: number): ReadPosition {
  return after === 0 ? START : { commit: BigInt(after), prepare: BigInt(after) };
}
