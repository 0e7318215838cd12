import type { RecordedEvent } from './events';
import { STEP_STATUSES } from './events';

/**
 * The one way from a stored event's JSON to the domain's RecordedEvent. A stored event the ledger
 * wrote always has its type's shape; one that does not was written by something else (a forged
 * row, a damaged file), so it is refused here, before any fold can misread it
 * (docs/reliability.md, "A log whose every loss is detectable"). Types the ledger does not know
 * pass through: `evolve` ignores them, so older readers survive newer events.
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

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);
const isString = (value: unknown) => typeof value === 'string';
const isCount = (value: unknown) => Number.isSafeInteger(value) && (value as number) >= 0;
const isInstant = (value: unknown) => typeof value === 'string' && Number.isFinite(Date.parse(value));

function fields(spec: Record<string, (value: unknown) => boolean>, optional: Record<string, (value: unknown) => boolean> = {}): Check {
  return (data) => {
    for (const [name, holds] of Object.entries(spec)) if (!holds(data[name])) return `data.${name} is missing or malformed`;
    for (const [name, holds] of Object.entries(optional)) if (data[name] !== undefined && !holds(data[name])) return `data.${name} is malformed`;
    return undefined;
  };
}

const oneOf = (values: readonly string[]) => (value: unknown) => typeof value === 'string' && values.includes(value);
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
const isDirective = (value: unknown) => isObject(value) && isString(value.next_action) && isCount(value.attempts_remaining);

const SHAPES: Record<string, Check> = {
  StepPlanned: fields({ run_id: isString, tool: isString, side_effect: oneOf(['read', 'write']), input_hash: isString, policy: isPolicy }),
  AttemptDispatched: fields({ attempt: isCount, input_hash: isString }),
  EnvelopeRecorded: fields({ attempt: isCount, envelope: isEnvelope, redactions: Array.isArray }),
  VerificationRecorded: fields({ outcome: oneOf(['found_committed', 'not_found', 'lookup_unavailable']), checked_at: isString, redactions: Array.isArray }),
  ApprovalRecorded: fields({ decision: oneOf(['granted', 'denied']), approver: isString }),
  TransitionRecorded: fields(
    { from: oneOf(['unplanned', ...STEP_STATUSES]), to: oneOf(STEP_STATUSES), reason: isString, caused_by: isString, directive: isDirective },
    { from_since: isInstant },
  ),
  DispatchRefused: fields({ attempt: isCount, input_hash: isString, code: isString }, { replayed_attempt: isCount }),
};

interface Candidate {
  type: string;
  data: Record<string, unknown>;
  event_id: string;
  recorded_at: string;
  revision?: number;
}

/** Whether the candidate has its type's shape; `found.problem` says what is wrong when it has not. */
function conforms(candidate: Candidate, found: { problem?: string }): candidate is Candidate & RecordedEvent {
  found.problem = SHAPES[candidate.type]?.(candidate.data);
  return found.problem === undefined;
}

/** Decodes one stored event for folding; throws EventShapeError when it is not what the ledger writes. */
export function decodeRecordedEvent(stored: StoredShape): RecordedEvent {
  const { event_id, type, data, recorded_at, revision } = stored;
  if (!isInstant(recorded_at)) throw new EventShapeError(event_id, 'recorded_at is not an instant');
  if (!isObject(data)) throw new EventShapeError(event_id, 'data is not an object');
  const candidate: Candidate = { type, data, event_id, recorded_at: recorded_at as string, ...(revision === undefined ? {} : { revision }) };
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
