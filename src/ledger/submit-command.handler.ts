import {
  decide,
  LedgerProblem,
  type Refused,
  type SecretDetector,
  type StepState,
  type SubmitAnswer,
  type SubmitCommand,
  type SubmitContext,
  type SubmitRequest,
  type SubmitResult,
  type SubmittedEvent,
  type WindowClock,
} from '@recovery-ledger/core';
import { DecisionSpan, tracedAppend } from '../observability/ledger-spans';
import { RevisionConflictError, type StoredEvent } from '../store/event-store.port';
import { operationStream } from '../store/stream-names';
import { decisionTime, type Clock } from '../shared/clock';
import { prepareFact, type PreparationSettings } from './fact-preparation';
import { answerAsFirstTime, freshEvents } from './idempotency';
import { refuseSecretIdentifiers } from './identifiers';
import { KeyedSerializer } from './keyed-serializer';
import type { BrokenStreams, SealedStreams, StreamSnapshot } from './sealed-streams';
import { SecretScanner, stringsOf } from './secret-scanner';
import { stateView, submitAnswer } from './step-views';
import { toNewEvents, type UnsealedEvent } from './stored-events';

export interface LedgerSettings extends PreparationSettings {
  /** Re-decisions after losing a race, when the caller gave no expected_revision. */
  maxConflictRetries: number;
  /** The most events one stream may hold (DEFAULT_MAX_STREAM_EVENTS when absent). */
  maxStreamEvents?: number;
}

/** docs/contract.md §3, "A bounded stream". */
export const DEFAULT_MAX_STREAM_EVENTS = 10_000;

export interface LedgerObserver {
  /** `step`: the operation appended to, the state it now stands in and the log position the append reached. */
  onAppended?(events: number, tenant: string, step: { operationRef: string; state: StepState; position: number }): void;
  /** `where`: the operation the refused fact was for (refusals not recorded in the log are seen only here). */
  onRefused?(code: string, where: { tenant: string; operationRef: string }): void;
}

/**
 * How windows are judged on this instance against the others sharing the store (src/ledger/
 * instance-clocks.ts); absent, one instance with its clock alone.
 */
export interface WindowClockSource {
  /** `fresh`: judged on heartbeats read after this call (the stream it decides on was read before). */
  windowClock(fresh: boolean): Promise<WindowClock>;
  /** Retry-After of a CLOCK_SKEW_UNBOUNDED: when the clocks are next compared. */
  retryAfterMs(): number;
}

/**
 * Facts that close an attempt's window (a `not_found`, a person's verification): decided on
 * heartbeats read after the stream, so the instance that wrote the attempt is among the clocks
 * compared (docs/reliability.md, "Windows across instances").
 */
function closesAWindow(event: SubmittedEvent): boolean {
  return (
    event.type === 'OutcomeVerifiedManually' ||
    (event.type === 'VerificationRecorded' && event.data.outcome === 'not_found')
  );
}

/**
 * A refusal as a value: the decider's refusal, the events that recorded it (none when it was not
 * recorded), and the state and revision the step stands at with them.
 */
interface Refusal {
  decision: Refused;
  recorded: UnsealedEvent[];
  state: StepState;
  revision: number;
}

/**
 * The one command path: read the stream (folded once), decide each fact (each event folded once,
 * by the decider), append at the revision read. Nothing else decides. A lost race is decided again
 * on the fresh stream, a bounded number of times.
 */
export class SubmitCommandHandler {
  private readonly perStream = new KeyedSerializer();

  constructor(
    private readonly streams: SealedStreams,
    private readonly clock: Clock,
    private readonly settings: LedgerSettings,
    private readonly observer: LedgerObserver,
    private readonly scanner: SecretScanner,
    private readonly broken: BrokenStreams,
    private readonly windows?: WindowClockSource,
  ) {}

  /**
   * Why no write may be decided now (a log found rolled back), if none may. Asked before anything
   * is read, decided or answered from a kept answer: an answer kept for an Idempotency-Key may be
   * the lost history's (docs/security.md, "A log rolled back").
   */
  writeRefusal(): Error | undefined {
    return this.broken.writeRefusal?.();
  }

  async submit({ context, request }: SubmitCommand): Promise<SubmitAnswer> {
    // Before anything is read or decided: a refusal here stores nothing (docs/security.md, "A log rolled back").
    const refusal = this.writeRefusal();
    if (refusal) throw refusal;
    // Scanned once, before the stream is read: the detector answers for every string of the submit.
    const detect = await this.scanner.detectorFor(
      stringsOf([context.operationRef, context.tracestate ?? '', request.events.map((event) => event.data)]),
    );
    refuseSecretIdentifiers(context, request, detect);
    const stream = operationStream(context.tenant, context.operationRef);
    return this.perStream.run(stream, () => this.submitOnce(stream, context, request, detect));
  }

  private async submitOnce(
    stream: string,
    context: SubmitContext,
    request: SubmitRequest,
    detect: SecretDetector,
  ): Promise<SubmitAnswer> {
    for (let attempt = 0; ; attempt++) {
      const snapshot = await this.streams.read(stream);
      // Only the submitted ids are looked up: idempotency never reads the stream whole.
      const stored = await this.streams.storedOf(
        snapshot,
        request.events.map((event) => event.event_id),
      );
      const span = new DecisionSpan(
        request.events.map((event) => event.type),
        snapshot.revision,
      );
      try {
        return await this.decideAndAppend(context, request, snapshot, stored, detect, span);
      } catch (error) {
        span.fail(error);
        if (!(error instanceof RevisionConflictError)) throw error;
        if (request.expected_revision !== undefined || attempt >= this.settings.maxConflictRetries) {
          throw new LedgerProblem(
            'REVISION_CONFLICT',
            'the operation changed while this request was decided; read it again',
            {
              field: 'expected_revision',
            },
          );
        }
      }
    }
  }

  private async decideAndAppend(
    context: SubmitContext,
    request: SubmitRequest,
    snapshot: StreamSnapshot,
    storedEvents: readonly StoredEvent[],
    detect: SecretDetector,
    span: DecisionSpan,
  ): Promise<SubmitAnswer> {
    const { fresh, stored } = freshEvents(request, storedEvents);
    if (fresh.length === 0) {
      span.end('duplicate');
      return answerAsFirstTime(context, request, storedEvents, this.streams, snapshot.stream);
    }
    if (request.expected_revision !== undefined && request.expected_revision !== snapshot.revision) {
      throw new LedgerProblem(
        'REVISION_CONFLICT',
        `expected revision ${request.expected_revision}, the stream is at ${snapshot.revision}`,
        {
          field: 'expected_revision',
        },
      );
    }

    const windowClock = await this.windows?.windowClock(fresh.some(closesAWindow));
    const now = decisionTime(this.clock, snapshot.last?.metadata.recorded_at);
    let state = snapshot.state;
    const toAppend: UnsealedEvent[] = [];
    let replayed = false;
    // Facts the decision took as already recorded (a plan repeated with the same definition under a
    // new id): nothing of them is appended, so their result must not say `appended`.
    const alreadyRecorded = new Set<string>();
    for (const submitted of fresh) {
      const index = request.events.indexOf(submitted);
      const fact = prepareFact(submitted, state, context.operationRef, this.settings, `events[${index}]`, detect);
      const decision = decide(state, {
        fact,
        event_id: submitted.event_id,
        now,
        ...(context.leaseExpiresAt === undefined ? {} : { lease_expires_at: context.leaseExpiresAt }),
        ...(windowClock === undefined ? {} : { window_clock: windowClock }),
      });
      if (decision.kind === 'refused') {
        this.observer.onRefused?.(decision.code, { tenant: context.tenant, operationRef: context.operationRef });
        span.end('refused', decision.code);
        const refusal = await this.recordRefusal(decision, submitted, context, now, snapshot, {
          state,
          empty: toAppend.length === 0,
        });
        throw this.refusalError(refusal, context);
      }
      if (decision.kind === 'replayed') replayed = true;
      if (decision.events.length === 0) alreadyRecorded.add(submitted.event_id);
      toAppend.push(...toNewEvents(decision.events, submitted, context, now));
      state = decision.state;
    }
    span.end(replayed ? 'replayed' : 'accepted');
    const results: SubmitResult[] = request.events.map((event) => ({
      event_id: event.event_id,
      status: stored.has(event.event_id) || alreadyRecorded.has(event.event_id) ? 'duplicate' : 'appended',
    }));
    const outcome = { operationRef: context.operationRef, state, results };
    if (toAppend.length === 0) {
      // Every fact was an idempotent no-op (a plan repeated with the same definition).
      return submitAnswer({
        ...outcome,
        revision: snapshot.revision,
        position: snapshot.last?.position ?? 0,
        replayed: false,
      });
    }
    this.refuseOverBound(snapshot, toAppend.length, context);
    const { revision, position } = await tracedAppend(toAppend.length, () =>
      this.streams.append(snapshot, toAppend, state),
    );
    this.observer.onAppended?.(toAppend.length, context.tenant, {
      operationRef: context.operationRef,
      state,
      position,
    });
    return submitAnswer({ ...outcome, revision, position, replayed });
  }

  /**
   * A refused dispatch is evidence (docs/contract.md §3): it is recorded when it was decided on the
   * stored state itself; a refusal inside a larger batch refuses the batch and stores nothing of it.
   */
  private async recordRefusal(
    decision: Refused,
    submitted: SubmittedEvent,
    context: SubmitContext,
    now: string,
    snapshot: StreamSnapshot,
    batch: { state: StepState; empty: boolean },
  ): Promise<Refusal> {
    if (decision.events.length === 0 || !batch.empty)
      return { decision, recorded: [], state: batch.state, revision: snapshot.revision };
    const recorded = toNewEvents(decision.events, submitted, context, now);
    this.refuseOverBound(snapshot, recorded.length, context);
    const { revision } = await tracedAppend(recorded.length, () =>
      this.streams.append(snapshot, recorded, decision.state),
    );
    return { decision, recorded, state: decision.state, revision };
  }

  /**
   * A stream holds at most `maxStreamEvents` (docs/contract.md §3, "A bounded stream"): past it
   * nothing is appended, so no caller can grow one stream, and what reading it costs, without end.
   */
  private refuseOverBound(snapshot: StreamSnapshot, adding: number, context: SubmitContext): void {
    const bound = this.settings.maxStreamEvents ?? DEFAULT_MAX_STREAM_EVENTS;
    const holds = snapshot.revision + 1;
    if (holds + adding <= bound) return;
    throw new LedgerProblem(
      'STREAM_FULL',
      `the operation's stream holds ${holds} events and may hold at most ${bound}: nothing more is recorded on it`,
      { state: stateView(context.operationRef, snapshot.state, snapshot.revision) },
    );
  }

  private refusalError({ decision, state, revision }: Refusal, context: SubmitContext): LedgerProblem {
    const retryAfterSeconds =
      decision.code === 'CLOCK_SKEW_UNBOUNDED'
        ? Math.max(1, Math.ceil((this.windows?.retryAfterMs() ?? 0) / 1000))
        : decision.directive.not_before
          ? Math.max(1, Math.ceil((Date.parse(decision.directive.not_before) - this.clock.now().getTime()) / 1000))
          : undefined;
    return new LedgerProblem(decision.code, decision.detail, {
      directive: decision.directive,
      state: stateView(context.operationRef, state, revision),
      ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
    });
  }
}
