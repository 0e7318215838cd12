import { decide, fold, initialState, isPlanned } from '../domain/decider';
import type { Directive } from '../domain/events';
import { isErrorCode, type ErrorCode } from '../errors/error-registry';
import type { Decision } from '../domain/decide';
import { EVENT_SCHEMA_VERSION, type LedgerEvent, type RecordedEvent } from '../domain/events';
import { LRUCache } from 'lru-cache';
import { decodeRecordedEvent, EventShapeError } from '../domain/event-codec';
import { evolve, type StepState } from '../domain/step-state';
import { LedgerError } from '../errors/ledger-error';
import { canonicalJson } from '../shared/canonical-json';
import {
  NO_STREAM,
  RevisionConflictError,
  StoreIntegrityError,
  type EventMetadata,
  type EventStore,
  type JsonObject,
  type NewEvent,
  type StoredEvent,
  type StreamIndexEntry,
  type StreamIndexer,
} from '../store/event-store.port';
import { sealEvents, verifyChain } from '../store/hash-chain';
import { operationStream } from '../store/stream-names';
import { decisionTime, type Clock } from './clock';
import { derivedEventId, sha256Hex } from './event-ids';
import { KeyedSerializer } from './keyed-serializer';
import { prepareFact, type PreparationSettings } from './fact-preparation';
import { refuseSecretIdentifiers } from './identifiers';
import { SecretScanner, stringsOf } from './secret-scanner';
import type { SecretDetector } from '../domain/envelope/redaction';
import type { StepView, SubmitAnswer, SubmitContext, SubmitRequest, SubmitResult, SubmittedEvent } from '../contract/ledger-api.types';

export interface LedgerSettings extends PreparationSettings {
  /** Re-decisions after losing a race, when the caller gave no expected_revision. */
  maxConflictRetries: number;
}

export interface LedgerObserver {
  onAppended?(events: number, tenant: string): void;
  /** `where`: the operation the refused fact was for (refusals not recorded in the log are seen only here). */
  onRefused?(code: string, where: { tenant: string; operationRef: string }): void;
}

/**
 * The index entry folded event by event, for a log indexed after it was written (one pass, however
 * long). A stream that does not fold (a forged event) is left out of the index; the audit reports it.
 */
export const stepIndexer: StreamIndexer<StepState | undefined> = {
  start: () => initialState(),
  add: (state, event) => {
    if (state === undefined) return undefined;
    try {
      return evolve(state, toRecorded(event));
    } catch {
      return undefined;
    }
  },
  entry: (state) => (state === undefined ? undefined : stepIndexEntry(state)),
};

/** Streams a whole-log audit found broken: refused before the store is even asked. */
export interface BrokenStreams {
  reasonFor(stream: string): string | undefined;
}

/**
 * A stored or about-to-be-stored event as the domain folds it. A stored event of a shape the ledger
 * never writes is an integrity fault of the stream, not a bug to answer 500 with.
 */
export function toRecorded(event: NewEvent & { revision?: number; stream?: string }): RecordedEvent {
  try {
    return decodeRecordedEvent({ ...event, recorded_at: event.metadata.recorded_at });
  } catch (error) {
    if (error instanceof EventShapeError) throw new StoreIntegrityError(event.stream, `an event of a shape the ledger never writes: ${error.message}`);
    throw error;
  }
}

/**
 * How a step is filed in the store's index, committed with its events: by status, with what a
 * recovery listing shows, so `GET /v1/recovery` answers from the log's own transaction and never
 * from a read model that may lag or be damaged (docs/reliability.md).
 */
export function stepIndexEntry(state: StepState): StreamIndexEntry | undefined {
  if (!isPlanned(state)) return undefined;
  return {
    key: state.status,
    data: {
      tool: state.definition.tool,
      run_id: state.definition.run_id,
      side_effect: state.definition.side_effect,
      since: state.since,
      attempt: state.current_attempt,
      attempts_used: state.attempts_used,
      reason: state.reason,
      ...(state.definition.policy.verification_tool ? { verification_tool: state.definition.policy.verification_tool } : {}),
    },
  };
}

export function stateView(operationRef: string, state: StepState, revision: number): StepView {
  if (!isPlanned(state)) {
    return { operation_ref: operationRef, status: 'unplanned', revision, attempts_used: 0, current_attempt: 0, attempts_remaining: 0 };
  }
  return {
    operation_ref: operationRef,
    status: state.status,
    revision,
    run_id: state.definition.run_id,
    tool: state.definition.tool,
    side_effect: state.definition.side_effect,
    policy: state.definition.policy,
    attempts_used: state.attempts_used,
    current_attempt: state.current_attempt,
    attempts_remaining: state.directive.attempts_remaining,
    ...(state.not_before === undefined ? {} : { not_before: state.not_before }),
    approval: state.approval,
    reason: state.reason,
    since: state.since,
    ...(state.last_envelope ? { last_envelope: state.last_envelope } : {}),
    ...(state.last_verification ? { last_verification: state.last_verification } : {}),
    ...(state.success ? { success: state.success } : {}),
  };
}

/** What the runtime may do next; an operation that was never planned has nothing to do. */
function directiveOf(state: StepState): Directive {
  return isPlanned(state) ? state.directive : { next_action: 'none', attempts_remaining: 0 };
}

/** Hash of what was submitted, to tell an honest resubmission from an id reused for another fact. */
function submittedHash(event: SubmittedEvent): string {
  return sha256Hex(canonicalJson({ type: event.type, data: event.data }));
}

interface StreamSnapshot {
  stream: string;
  events: StoredEvent[];
  state: StepState;
  revision: number;
}

/**
 * The one command path: read the stream, fold it, decide, append at the revision read.
 * Nothing else decides. A lost race is decided again on the fresh stream, a bounded number of times.
 */
export class LedgerService {
  constructor(
    private readonly store: EventStore,
    private readonly clock: Clock,
    private readonly settings: LedgerSettings,
    private readonly observer: LedgerObserver = {},
    private readonly broken: BrokenStreams = { reasonFor: () => undefined },
    private readonly scanner: SecretScanner = new SecretScanner(),
  ) {}

  private readonly perStream = new KeyedSerializer();
  /**
   * The last head each stream's chain was re-hashed up to, so a decision re-hashes only the events
   * it has not seen. The whole-log audit (at start, on demand) re-hashes everything.
   */
  private readonly verifiedHeads = new LRUCache<string, { revision: number; hash: string }>({ max: 10_000 });

  async submit(context: SubmitContext, request: SubmitRequest): Promise<SubmitAnswer> {
    // Scanned once, before the stream is read: the detector answers for every string of the submit.
    const detect = await this.scanner.detectorFor(stringsOf([context.operationRef, context.tracestate ?? '', request.events.map((event) => event.data)]));
    refuseSecretIdentifiers(context, request, detect);
    const stream = operationStream(context.tenant, context.operationRef);
    return this.perStream.run(stream, () => this.submitOnce(stream, context, request, detect));
  }

  private async submitOnce(stream: string, context: SubmitContext, request: SubmitRequest, detect: SecretDetector): Promise<SubmitAnswer> {
    for (let attempt = 0; ; attempt++) {
      const snapshot = await this.read(stream);
      try {
        return await this.decideAndAppend(context, request, snapshot, detect);
      } catch (error) {
        if (!(error instanceof RevisionConflictError)) throw error;
        if (request.expected_revision !== undefined || attempt >= this.settings.maxConflictRetries) {
          throw new LedgerError('REVISION_CONFLICT', 'the operation changed while this request was decided; read it again', {
            field: 'expected_revision',
          });
        }
      }
    }
  }

  async getState(tenant: string, operationRef: string, asOfRevision?: number): Promise<{ view: StepView; events: StoredEvent[] }> {
    const snapshot = await this.read(operationStream(tenant, operationRef));
    if (snapshot.events.length === 0) throw new LedgerError('OPERATION_NOT_FOUND', 'the operation has no events');
    if (asOfRevision === undefined) return { view: stateView(operationRef, snapshot.state, snapshot.revision), events: snapshot.events };
    const upTo = snapshot.events.filter((event) => event.revision <= asOfRevision);
    const revision = upTo.length === 0 ? NO_STREAM : upTo[upTo.length - 1].revision;
    return { view: stateView(operationRef, fold(upTo.map(toRecorded)), revision), events: snapshot.events };
  }

  /** The step folded from its own stream (strongly consistent), for the work feed's judgement. */
  async currentState(tenant: string, operationRef: string): Promise<{ state: StepState; revision: number }> {
    const snapshot = await this.read(operationStream(tenant, operationRef));
    return { state: snapshot.state, revision: snapshot.revision };
  }

  /**
   * Reads a stream for a decision or an answer, and believes it only once it is the history the
   * ledger wrote: its chain holds, its last event is the anchored head, and no whole-log audit has
   * found it broken. Otherwise nothing is decided or answered on it (HISTORY_INTEGRITY_FAILED).
   */
  private async read(stream: string): Promise<StreamSnapshot> {
    const known = this.broken.reasonFor(stream);
    if (known) throw new StoreIntegrityError(stream, known);
    const { events, head } = await this.store.readStreamAnchored(stream);
    const found = verifyChain(events, this.verifiedHeads.get(stream));
    if (found) throw new StoreIntegrityError(stream, `the hash chain breaks at revision ${found.revision} (${found.reason})`);
    const last = events[events.length - 1];
    if (this.store.keepsAnchors && (head?.revision !== last?.revision || head?.hash !== last?.metadata.hash)) {
      throw new StoreIntegrityError(stream, `the stream ends at revision ${last?.revision ?? 'none'}, its anchored head is ${head?.revision ?? 'none'}`);
    }
    if (last) this.verifiedHeads.set(stream, { revision: last.revision, hash: last.metadata.hash });
    const state = fold(events.map(toRecorded), initialState());
    return { stream, events, state, revision: last === undefined ? NO_STREAM : last.revision };
  }

  private async decideAndAppend(context: SubmitContext, request: SubmitRequest, snapshot: StreamSnapshot, detect: SecretDetector): Promise<SubmitAnswer> {
    const byId = new Map(snapshot.events.map((event) => [event.event_id, event]));
    const fresh = request.events.filter((event) => !byId.has(event.event_id));
    for (const event of request.events) {
      const stored = byId.get(event.event_id);
      if (stored && stored.metadata.submitted_hash !== submittedHash(event)) {
        throw new LedgerError('EVENT_ID_REUSED', `event_id ${event.event_id} was already used for another fact`, {
          field: `events[${request.events.indexOf(event)}].event_id`,
        });
      }
    }
    if (fresh.length === 0) return this.answerAsFirstTime(context, request, snapshot);
    if (request.expected_revision !== undefined && request.expected_revision !== snapshot.revision) {
      throw new LedgerError('REVISION_CONFLICT', `expected revision ${request.expected_revision}, the stream is at ${snapshot.revision}`, {
        field: 'expected_revision',
      });
    }

    const now = decisionTime(this.clock, snapshot.events[snapshot.events.length - 1]?.metadata.recorded_at);
    let state = snapshot.state;
    const toAppend: NewEvent[] = [];
    let replayed = false;
    // Facts the decision took as already recorded (a plan repeated with the same definition under a
    // new id): nothing of them is appended, so their result must not say `appended`.
    const alreadyRecorded = new Set<string>();
    for (const submitted of fresh) {
      const index = request.events.indexOf(submitted);
      const fact = prepareFact(submitted, state, context.operationRef, this.settings, `events[${index}]`, detect);
      const decision: Decision = decide(state, { fact, event_id: submitted.event_id, now });
      if (decision.kind === 'refused') {
        this.observer.onRefused?.(decision.code, { tenant: context.tenant, operationRef: context.operationRef });
        // A refused dispatch is evidence (docs/contract.md §3): it is recorded when it was decided on the stored
        // state itself; a refusal inside a larger batch refuses the batch and stores nothing of it.
        if (decision.events.length > 0 && toAppend.length === 0) {
          const recorded = this.toNewEvents(decision.events, submitted, context, now);
          const after = recorded.reduce((folded, event) => evolve(folded, toRecorded(event)), state);
          const result = await this.appendSealed(snapshot, recorded, after);
          throw this.refusal(decision, context, after, result.revision);
        }
        throw this.refusal(decision, context, state, snapshot.revision);
      }
      if (decision.kind === 'replayed') replayed = true;
      if (decision.events.length === 0) alreadyRecorded.add(submitted.event_id);
      const newEvents = this.toNewEvents(decision.events, submitted, context, now);
      for (const event of newEvents) state = evolve(state, toRecorded(event));
      toAppend.push(...newEvents);
    }
    const results: SubmitResult[] = request.events.map((event) => ({
      event_id: event.event_id,
      status: byId.has(event.event_id) || alreadyRecorded.has(event.event_id) ? 'duplicate' : 'appended',
    }));
    if (toAppend.length === 0) {
      // Every fact was an idempotent no-op (a plan repeated with the same definition).
      const last = snapshot.events[snapshot.events.length - 1];
      return this.answer(context, state, snapshot.revision, last?.position ?? 0, results, false);
    }
    const { revision, position } = await this.appendSealed(snapshot, toAppend, state);
    this.observer.onAppended?.(toAppend.length, context.tenant);
    return this.answer(context, state, revision, position, results, replayed);
  }

  /** The fact keeps the runtime's event id; what it causes gets ids derived from it. */
  private toNewEvents(events: LedgerEvent[], submitted: SubmittedEvent, context: SubmitContext, now: string): NewEvent[] {
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
      return { event_id: eventId, type: event.type, data: event.data as unknown as JsonObject, metadata } as NewEvent;
    });
  }

  private async appendSealed(snapshot: StreamSnapshot, events: NewEvent[], after: StepState) {
    const last = snapshot.events[snapshot.events.length - 1];
    const sealed = sealEvents(snapshot.stream, last ? { revision: last.revision, hash: last.metadata.hash } : undefined, events);
    const index = stepIndexEntry(after);
    return this.store.append(snapshot.stream, snapshot.revision, sealed, index ? { index } : {});
  }

  private refusal(decision: Extract<Decision, { kind: 'refused' }>, context: SubmitContext, state: StepState, revision: number) {
    const retryAfterSeconds = decision.directive.not_before
      ? Math.max(1, Math.ceil((Date.parse(decision.directive.not_before) - this.clock.now().getTime()) / 1000))
      : undefined;
    return new LedgerError(decision.code, decision.detail, {
      directive: decision.directive,
      state: stateView(context.operationRef, state, revision),
      ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
    });
  }

  private answer(
    context: SubmitContext,
    state: StepState,
    revision: number,
    position: number,
    results: SubmitResult[],
    replayed: boolean,
  ): SubmitAnswer {
    const directive = directiveOf(state);
    return {
      revision,
      position,
      state: stateView(context.operationRef, state, revision),
      directive,
      results,
      ...(replayed && isPlanned(state) ? { replayed: true as const, success: state.success } : {}),
    };
  }

  /**
   * A resubmission of facts already stored: the answer of the first time, from the stream as it
   * stood right after that submit (its fact and everything the fact caused).
   */
  private answerAsFirstTime(context: SubmitContext, request: SubmitRequest, snapshot: StreamSnapshot): SubmitAnswer {
    const ids = new Set(request.events.map((event) => event.event_id));
    let end = -1;
    snapshot.events.forEach((event, index) => {
      if (ids.has(event.event_id) || (event.metadata.causation_event_id && ids.has(event.metadata.causation_event_id))) end = index;
    });
    const upTo = snapshot.events.slice(0, end + 1);
    const state = fold(upTo.map(toRecorded));
    const last = upTo[upTo.length - 1];
    const results: SubmitResult[] = request.events.map((event) => ({ event_id: event.event_id, status: 'duplicate' }));
    const refusalEvent = upTo.find((event) => ids.has(event.event_id) && event.type === 'DispatchRefused');
    const code = refusalEvent ? String((refusalEvent.data as { code?: unknown }).code) : undefined;
    if (refusalEvent && code !== 'DUPLICATE_PREVENTED') {
      // Only dispatch refusals are recorded, and each bears a registered refusal code.
      throw new LedgerError(isErrorCode(code as string) ? (code as ErrorCode) : 'INTERNAL_ERROR', 'this dispatch was refused when first submitted', {
        directive: directiveOf(state),
        state: stateView(context.operationRef, state, last.revision),
        results,
      });
    }
    return this.answer(context, state, last.revision, last.position, results, refusalEvent !== undefined);
  }
}

