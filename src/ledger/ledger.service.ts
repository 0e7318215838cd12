import {
  LedgerProblem,
  type StepState,
  type StepView,
  type SubmitAnswer,
  type SubmitContext,
  type SubmitRequest,
} from '@recovery-ledger/core';
import { NO_STREAM, type EventStore, type StoredEvent } from '../store/event-store.port';
import { operationStream } from '../store/stream-names';
import type { Clock } from '../shared/clock';
import { SealedStreams, type BrokenStreams } from './sealed-streams';
import { secretScanner, type SecretScanner } from './secret-scanner';
import { stateView } from './step-views';
import {
  SubmitCommandHandler,
  type LedgerObserver,
  type LedgerSettings,
  type WindowClockSource,
} from './submit-command.handler';

export type { BrokenStreams } from './sealed-streams';
export type { LedgerObserver, LedgerSettings } from './submit-command.handler';

/**
 * The ledger as the rest of the service sees it: submit a command, read a step's state. Each job
 * lives in its own file: the command path (submit-command.handler.ts), event-id idempotency
 * (idempotency.ts), reading and sealing streams (sealed-streams.ts), the codec's crossings
 * (stored-events.ts) and the views (step-views.ts).
 */
export class LedgerService {
  private readonly streams: SealedStreams;
  /** The one command path; the submit route hands it its command directly. */
  readonly commands: SubmitCommandHandler;

  constructor(
    store: EventStore,
    clock: Clock,
    settings: LedgerSettings,
    observer: LedgerObserver = {},
    private readonly broken: BrokenStreams = { reasonFor: () => undefined },
    scanner: SecretScanner = secretScanner,
    windows?: WindowClockSource,
  ) {
    this.streams = new SealedStreams(store, broken);
    this.commands = new SubmitCommandHandler(this.streams, clock, settings, observer, scanner, broken, windows);
  }

  /** A submit from inside the process (tests, the bench's workloads): the same command path. */
  submit(context: SubmitContext, request: SubmitRequest): Promise<SubmitAnswer> {
    return this.commands.submit({ context, request });
  }

  /** Why no write may be decided now (a log found rolled back), if so: for the work feed's leases too. */
  writeRefusal(): Error | undefined {
    return this.broken.writeRefusal?.();
  }

  /**
   * The step's view now or, with `asOfRevision`, as it stood then; with the stream's revision. Each
   * folds only the events after the state kept last before it (src/ledger/sealed-streams.ts).
   */
  async getState(
    tenant: string,
    operationRef: string,
    asOfRevision?: number,
  ): Promise<{ view: StepView; revision: number }> {
    const stream = operationStream(tenant, operationRef);
    const snapshot = await this.streams.read(stream);
    if (snapshot.revision === NO_STREAM) throw new LedgerProblem('OPERATION_NOT_FOUND', 'the operation has no events');
    if (asOfRevision === undefined || asOfRevision >= snapshot.revision)
      return { view: stateView(operationRef, snapshot.state, snapshot.revision), revision: snapshot.revision };
    const then = await this.streams.stateAt(stream, asOfRevision);
    return { view: stateView(operationRef, then.state, then.revision), revision: snapshot.revision };
  }

  /**
   * Up to `limit` of the stream's events after `afterRevision`, each re-hashed, with the stream's
   * revision (its head checked as `getState` checks it): a page costs what its events cost.
   */
  async events(
    tenant: string,
    operationRef: string,
    page: { afterRevision: number; limit: number },
  ): Promise<{ revision: number; events: StoredEvent[] }> {
    const stream = operationStream(tenant, operationRef);
    const snapshot = await this.streams.read(stream);
    if (snapshot.revision === NO_STREAM) throw new LedgerProblem('OPERATION_NOT_FOUND', 'the operation has no events');
    const from = page.afterRevision + 1;
    const events = from > snapshot.revision ? [] : await this.streams.readRange(stream, from, page.limit);
    return { revision: snapshot.revision, events };
  }

  /** The step folded from its own stream (strongly consistent), for the work feed's judgement. */
  async currentState(tenant: string, operationRef: string): Promise<{ state: StepState; revision: number }> {
    const snapshot = await this.streams.read(operationStream(tenant, operationRef));
    return { state: snapshot.state, revision: snapshot.revision };
  }
}
