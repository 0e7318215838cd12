import { isJsonObject, type JsonObject } from '../shared/json';
import { SUBMITTED_FACTS } from '../facts/submitted-facts';
import {
  LEDGER_EVENT_TYPES,
  SIDE_EFFECTS,
  STEP_STATUSES,
  STEP_VIEW_STATUSES,
  VERIFICATION_OUTCOMES,
  type LedgerEvent,
  type LedgerEventType,
  type RecordedEvent,
} from './events';

/**
 * The one codec between the store's JSON (an event's `type` and `data`) and the domain's typed
 * events, checked at run time both ways:
 * - `encodeLedgerEvent`: a domain event as the store keeps it; what does not have its type's shape
 *   is never written.
 * - `decodeRecordedEvent`: a stored event for the ledger's folds. A stored event the ledger wrote
 *   always has its type's shape; one that does not was written by something else (a forged row, a
 *   damaged file), so it is refused here, before any fold can misread it (docs/reliability.md, "A
 *   log whose every loss is detectable"). Types the ledger does not know pass through: `evolve`
 *   ignores them, so older readers survive newer events.
 * - `readLedgerEvent`: a stored event for the projections, which skip what they cannot read
 *   instead of refusing it (a fold that throws stops the engine for every reader).
 */
export class EventShapeError extends Error {
  constructor(
    readonly eventId: string,
    readonly detail: string,
  ) {
    super(`event ${eventId}: ${detail}`);
    this.name = 'EventShapeError';
  }
}

export interface StoredShape {
  event_id: string;
  type: string;
  data: unknown;
  recorded_at: unknown;
  revision?: number;
}

type Check = (data: Record<string, unknown>) => string | undefined;

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);
const isString = (value: unknown) => typeof value === 'string';
const isBoolean = (value: unknown) => typeof value === 'boolean';
const isCount = (value: unknown) => Number.isSafeInteger(value) && (value as number) >= 0;
const isInstant = (value: unknown) => typeof value === 'string' && Number.isFinite(Date.parse(value));

function fields(
  spec: Record<string, (value: unknown) => boolean>,
  optional: Record<string, (value: unknown) => boolean> = {},
): Check {
  return (data) => {
    for (const [name, holds] of Object.entries(spec))
      if (!holds(data[name])) return `data.${name} is missing or malformed`;
    for (const [name, holds] of Object.entries(optional))
      if (data[name] !== undefined && !holds(data[name])) return `data.${name} is malformed`;
    return undefined;
  };
}

const oneOf = (values: readonly string[]) => (value: unknown) => typeof value === 'string' && values.includes(value);
const isLedgerEventType = (type: string): type is LedgerEventType => LEDGER_EVENT_TYPES.some((known) => known === type);
const isPolicy = (value: unknown) =>
  isObject(value) &&
  isCount(value.max_attempts) &&
  isCount(value.consistency_window_ms) &&
  isCount(value.max_consecutive_dependency_failures) &&
  (value.verification_tool === undefined || isString(value.verification_tool));
/** A failure carries a code; a success (and a read tool's small form) may carry less. */
const isEnvelope = (value: unknown) =>
  isObject(value) &&
  typeof value.ok === 'boolean' &&
  (value.ok || isString(value.code)) &&
  (value.commit_state === undefined || isString(value.commit_state));
const isDirective = (value: unknown) =>
  isObject(value) && isString(value.next_action) && isCount(value.attempts_remaining);

interface FieldDefinition {
  type?: string;
  enum?: readonly string[];
}

/** What a stored field of a schema's type must hold: the vocabulary, a string, a count. */
function holdsDefined(field: FieldDefinition): (value: unknown) => boolean {
  if (field.enum) return oneOf(field.enum);
  if (field.type === 'integer') return isCount;
  if (field.type === 'string') return isString;
  return () => true;
}

/**
 * The stored shape of a fact stored as its schema defines it (src/ledger/fact-preparation.ts,
 * `storedAsDefined`): its required fields present and of their type, its optional ones of their type.
 */
function asDefined(type: keyof typeof SUBMITTED_FACTS): Check {
  const schema = SUBMITTED_FACTS[type].data as {
    required: readonly string[];
    properties: Record<string, FieldDefinition>;
  };
  const required = new Set(schema.required);
  const entries = Object.entries(schema.properties).map(([name, field]) => [name, holdsDefined(field)] as const);
  return fields(
    Object.fromEntries(entries.filter(([name]) => required.has(name))),
    Object.fromEntries(entries.filter(([name]) => !required.has(name))),
  );
}

/**
 * Each type's shape, with how its plan's policy is held: whole for the ledger, loosely for
 * projections. A submitted fact stored as its schema defines it needs no line here.
 */
function shapes(policy: (value: unknown) => boolean): Record<LedgerEventType, Check> {
  const defined = Object.fromEntries(
    (Object.keys(SUBMITTED_FACTS) as Array<keyof typeof SUBMITTED_FACTS>).map((type) => [type, asDefined(type)]),
  ) as Record<keyof typeof SUBMITTED_FACTS, Check>;
  return {
    ...defined,
    StepPlanned: fields({
      run_id: isString,
      tool: isString,
      side_effect: oneOf(SIDE_EFFECTS),
      input_hash: isString,
      policy,
    }),
    AttemptDispatched: fields(
      { attempt: isCount, input_hash: isString },
      { call_window_ms: isCount, call_deadline: isInstant },
    ),
    EnvelopeRecorded: fields({ attempt: isCount, envelope: isEnvelope, redactions: Array.isArray }),
    VerificationRecorded: fields({
      outcome: oneOf(VERIFICATION_OUTCOMES),
      checked_at: isString,
      redactions: Array.isArray,
    }),
    TransitionRecorded: fields(
      {
        from: oneOf(STEP_VIEW_STATUSES),
        to: oneOf(STEP_STATUSES),
        reason: isString,
        caused_by: isString,
        directive: isDirective,
      },
      { from_since: isInstant },
    ),
    DispatchRefused: fields({ attempt: isCount, input_hash: isString, code: isString }, { replayed_attempt: isCount }),
    LateOutcomeRecorded: fields({
      attempt: isCount,
      envelope: isEnvelope,
      redactions: Array.isArray,
      possible_duplicate: isBoolean,
    }),
  };
}

const SHAPES = shapes(isPolicy);
/**
 * Projections read a plan's policy field by field, each with its default (`dispatchTimeoutMs`), so
 * a plan whose policy lacks fields is still filed; every other field is held as the ledger holds it.
 */
const READABLE_SHAPES = shapes(isObject);

interface Candidate {
  type: string;
  data: Record<string, unknown>;
  event_id: string;
  recorded_at: string;
  revision?: number;
}

/** Whether the candidate has its type's shape; `found.problem` says what is wrong when it has not. */
function conforms(candidate: Candidate, found: { problem?: string }): candidate is Candidate & RecordedEvent {
  found.problem = isLedgerEventType(candidate.type) ? SHAPES[candidate.type](candidate.data) : undefined;
  return found.problem === undefined;
}

/** Whether a known type's data has the shape a projection reads. */
function readable(event: {
  type: LedgerEventType;
  data: Record<string, unknown>;
}): event is LedgerEvent & { data: Record<string, unknown> } {
  return READABLE_SHAPES[event.type](event.data) === undefined;
}

/**
 * A domain event as the store keeps it: its type and its data as JSON, the same object (so the
 * bytes hashed and stored are those the decider produced). Throws EventShapeError when the event
 * does not have its type's shape: the ledger never writes what it could not read back.
 */
export function encodeLedgerEvent(event: LedgerEvent, eventId: string): { type: LedgerEventType; data: JsonObject } {
  const { type, data } = event;
  if (!isJsonObject(data)) throw new EventShapeError(eventId, `${type}: data is not a JSON object`);
  const problem = SHAPES[type](data);
  if (problem !== undefined) throw new EventShapeError(eventId, `${type}: ${problem}`);
  return { type, data };
}

/**
 * A stored event as a projection reads it, or undefined for a type this code does not know (a
 * newer ledger wrote it) or data of another shape: old readers survive new events, and a
 * projection skips what it cannot read instead of throwing.
 */
export function readLedgerEvent(stored: { type: string; data: unknown }): LedgerEvent | undefined {
  const { type, data } = stored;
  if (!isObject(data) || !isLedgerEventType(type)) return undefined;
  const event = { type, data };
  return readable(event) ? event : undefined;
}

/** Decodes one stored event for folding; throws EventShapeError when it is not what the ledger writes. */
export function decodeRecordedEvent(stored: StoredShape): RecordedEvent {
  const { event_id, type, data, recorded_at, revision } = stored;
  if (!isInstant(recorded_at)) throw new EventShapeError(event_id, 'recorded_at is not an instant');
  if (!isObject(data)) throw new EventShapeError(event_id, 'data is not an object');
  const candidate: Candidate = {
    type,
    data,
    event_id,
    recorded_at: recorded_at as string,
    ...(revision === undefined ? {} : { revision }),
  };
  const found: { problem?: string } = {};
  if (!conforms(candidate, found)) throw new EventShapeError(event_id, `${type}: ${found.problem}`);
  return candidate;
}

/** What is wrong with a stored event's shape, or undefined: for audits that report and go on. */
export function eventShapeProblem(stored: StoredShape): string | undefined {
  try {
    decodeRecordedEvent(stored);
    return undefined;
  } catch (error) {
    if (error instanceof EventShapeError) return error.detail;
    throw error;
  }
}
