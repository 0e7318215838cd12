import {
  decodeRecordedEvent,
  EventShapeError,
  evolve,
  initialState,
  isSubmittedFactType,
  isTerminalStatus,
  type EventView,
  type RecordedEvent,
  type StepState,
  type StepView,
  SUBMITTED_FACTS,
} from '@recovery-ledger/core';
import { eventView, stateView } from '../ledger/step-views';
import type { StoredEvent } from '../store/event-store.port';

/**
 * One event of the timeline, from its wire shape (`EventView`) whether read from the store or
 * `GET /v1/operations/{ref}/events`; its cause is named `caused_by` in the timeline's output.
 */
export type TimelineEvent = Pick<
  EventView,
  'revision' | 'position' | 'event_id' | 'type' | 'recorded_at' | 'actor' | 'data'
> & {
  caused_by?: string;
};

export interface TimelineRow extends TimelineEvent {
  /** Why this event is there, in one line: the fact, the refusal code, the transition's reason. */
  why: string;
  /** The step's state folded up to and including this event. */
  state: StepView;
}

export interface StateSpan {
  status: string;
  from: string;
  /** When the next state began; absent for the state the step is (or, with --as-of, was) in. */
  to?: string;
  ms?: number;
}

export interface Timeline {
  operation_ref: string;
  /** The stream's last revision, whatever --as-of cuts. */
  revision: number;
  as_of_revision?: number;
  rows: TimelineRow[];
  time_in_state: StateSpan[];
}

/** A timeline row's event, from the events API's view of it (which the local store is read through too). */
export function fromEventView(event: EventView): TimelineEvent {
  return {
    revision: event.revision,
    position: event.position,
    event_id: event.event_id,
    type: event.type,
    recorded_at: event.recorded_at,
    actor: event.actor,
    ...(event.causation_event_id ? { caused_by: event.causation_event_id } : {}),
    data: event.data,
  };
}

export const fromStored = (event: StoredEvent): TimelineEvent => fromEventView(eventView(event));

const text = (value: unknown): string => (typeof value === 'string' || typeof value === 'number' ? String(value) : '?');
const record = (value: unknown): Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};

/** The one-line "why" of an event, from its own data (the same words for replay and tail). */
export function describeEvent(type: string, data: Record<string, unknown>): string {
  // A submitted fact's line is in its one definition (packages/core/src/facts/submitted-facts.ts).
  if (isSubmittedFactType(type)) return SUBMITTED_FACTS[type].replay(data);
  switch (type) {
    case 'DispatchRefused':
      return data.code === 'DUPLICATE_PREVENTED'
        ? `dispatch of attempt ${text(data.attempt)} answered with the success of attempt ${text(data.replayed_attempt)}: duplicate write prevented`
        : `dispatch of attempt ${text(data.attempt)} refused: ${text(data.code)}`;
    case 'LateOutcomeRecorded': {
      const envelope = record(data.envelope);
      const outcome = envelope.ok === true ? 'committed' : `${text(envelope.code)} (${text(envelope.commit_state)})`;
      const flag =
        data.possible_duplicate === true
          ? ' after a later attempt was granted: it may have reached the provider: possible duplicate write'
          : '';
      return `late envelope of attempt ${text(data.attempt)}: ${outcome}${flag}`;
    }
    case 'TransitionRecorded': {
      const directive = record(data.directive);
      const notBefore = directive.not_before ? ` not before ${text(directive.not_before)}` : '';
      return `${text(data.from)} -> ${text(data.to)} because ${text(data.reason)}; next ${text(directive.next_action)}${notBefore}`;
    }
    default:
      // Written by a newer ledger: shown, not interpreted (evolve ignores it too).
      return `${type} (not interpreted by this version)`;
  }
}

/**
 * What `evolve` reads of an event, decoded by the ledger's one codec (packages/core/src/domain/event-codec.ts),
 * for an event that may have come over HTTP. An event of a shape the ledger never writes is shown
 * but not folded: the ledger itself refuses to decide on such a stream.
 */
function asRecorded(event: TimelineEvent): RecordedEvent | undefined {
  try {
    return decodeRecordedEvent(event);
  } catch (error) {
    if (error instanceof EventShapeError) return undefined;
    throw error;
  }
}

/**
 * The operation's history with the state after each event: the same fold the ledger decides on
 * (src/domain), applied one event at a time, so replay shows exactly what the decider saw.
 */
export function buildTimeline(operationRef: string, events: readonly TimelineEvent[], asOfRevision?: number): Timeline {
  const shown = asOfRevision === undefined ? events : events.filter((event) => event.revision <= asOfRevision);
  let state: StepState = initialState();
  const rows = shown.map((event): TimelineRow => {
    const recorded = asRecorded(event);
    if (recorded) state = evolve(state, recorded);
    return {
      ...event,
      why: describeEvent(event.type, event.data),
      state: stateView(operationRef, state, event.revision),
    };
  });
  const spans: StateSpan[] = [];
  for (const row of rows) {
    const current = spans[spans.length - 1];
    if (current && current.status === row.state.status) continue;
    if (current) {
      current.to = row.recorded_at;
      current.ms = Math.max(0, Date.parse(row.recorded_at) - Date.parse(current.from));
    }
    spans.push({ status: row.state.status, from: row.recorded_at });
  }
  return {
    operation_ref: operationRef,
    revision: events.length === 0 ? -1 : events[events.length - 1].revision,
    ...(asOfRevision === undefined ? {} : { as_of_revision: asOfRevision }),
    rows,
    time_in_state: spans,
  };
}

/** Terminal states have no duration worth showing: the step stays there. */
export const isTerminal = (status: string) => isTerminalStatus(status);
