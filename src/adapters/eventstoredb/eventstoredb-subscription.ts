import {
  excludeSystemEvents,
  streamNameFilter,
  type AllStreamResolvedEvent,
  type AllStreamSubscription,
  type EventStoreDBClient,
} from '@eventstore/db-client';
import type { StoredEvent, Subscription, SubscriptionHandlers } from '../../store/event-store.port';
import { isLedgerEvent, toReadPosition, toStoredEvent, UnexpectedStoredEventError } from './eventstoredb-event-codec';
import { reconnectDelay, type BackoffPolicy } from './reconnect-backoff';

export type SubscriptionState = 'connecting' | 'live' | 'reconnecting' | 'stopped';

/** What a readiness probe or a metrics gauge needs to know about one subscription. */
export interface SubscriptionStatus {
  subscription: number;
  state: SubscriptionState;
  /** The last position delivered to the handler (the resume point after a drop). */
  position: number;
  /** The backoff step: failed attempts since the subscription last stayed up longer than the longest delay. */
  attempt: number;
  retryInMs?: number;
  detail?: string;
}

export interface ResilientSubscriptionOptions {
  id: number;
  client: () => EventStoreDBClient;
  after: number;
  streamPrefix?: string;
  handlers: SubscriptionHandlers;
  backoff: BackoffPolicy;
  maxBatchSize: number;
  onStatus: (status: SubscriptionStatus) => void;
}

/** The consumer's own failure: the subscription stops and reports it instead of retrying. */
class HandlerFailure extends Error {
  constructor(readonly original: unknown) {
    super('subscription handler failed');
  }
}

/**
 * A catch-up subscription to `$all` that survives drops. The client never re-subscribes after an
 * error or an end of the call, so this loop does: from the last position it delivered (exclusive,
 * as `fromPosition` is on the server), after a capped, jittered backoff. Events at or before that
 * position are skipped, so a consumer sees every event once, in log order, across any number of drops.
 */
export class ResilientAllSubscription implements Subscription {
  private position: number;
  private state: SubscriptionState = 'connecting';
  private attempt = 0;
  private liveSince = 0;
  private detail?: string;
  private closed = false;
  private wake?: () => void;
  private readonly loop: Promise<void>;

  constructor(private readonly options: ResilientSubscriptionOptions) {
    this.position = options.after;
    this.loop = this.run();
  }

  get status(): SubscriptionStatus {
    return {
      subscription: this.options.id,
      state: this.state,
      position: this.position,
      attempt: this.attempt,
      detail: this.detail,
    };
  }

  /** Down means events written now are not reaching the consumer. */
  get isDown(): boolean {
    return this.state === 'reconnecting';
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.closed) {
      let subscription: AllStreamSubscription | undefined;
      let delay: number;
      try {
        subscription = this.options.client().subscribeToAll(
          {
            fromPosition: toReadPosition(this.position),
            resolveLinkTos: false,
            // The server filters; isLedgerEvent checks again on this side.
            filter: this.options.streamPrefix
              ? streamNameFilter({ prefixes: [this.options.streamPrefix] })
              : excludeSystemEvents(),
          },
          { highWaterMark: this.options.maxBatchSize },
        );
        await this.consume(subscription);
        if (this.closed) break;
        delay = this.markDown('the server ended the subscription');
      } catch (error) {
        if (this.closed) break;
        if (error instanceof HandlerFailure) return this.stop(error.original);
        if (error instanceof UnexpectedStoredEventError) return this.stop(error);
        delay = this.markDown(error instanceof Error ? error.message : String(error));
      } finally {
        if (subscription) release(subscription);
      }
      await this.pause(delay);
    }
    this.setState('stopped');
  }

  /** Reads what the subscription has buffered in batches, delivering each before reading on. */
  private async consume(subscription: AllStreamSubscription): Promise<void> {
    let ended = false;
    let failure: unknown;
    let signal: (() => void) | undefined;
    const poke = () => {
      const resolve = signal;
      signal = undefined;
      resolve?.();
    };
    this.wake = poke;
    subscription.on('readable', poke);
    subscription.on('end', () => {
      ended = true;
      poke();
    });
    subscription.on('close', () => {
      ended = true;
      poke();
    });
    subscription.on('error', (error: unknown) => {
      failure ??= error;
      poke();
    });
    subscription.on('confirmation', () => this.markLive());
    try {
      for (;;) {
        if (this.closed) return;
        if (failure !== undefined) throw failure;
        const batch: AllStreamResolvedEvent[] = [];
        let item: AllStreamResolvedEvent | null;
        while (
          batch.length < this.options.maxBatchSize &&
          (item = subscription.read() as AllStreamResolvedEvent | null) !== null
        ) {
          batch.push(item);
        }
        if (batch.length > 0) {
          await this.deliver(batch);
          continue;
        }
        if (ended) return;
        await new Promise<void>((resolve) => (signal = resolve));
      }
    } finally {
      this.wake = () => undefined;
    }
  }

  private async deliver(batch: AllStreamResolvedEvent[]): Promise<void> {
    const events: StoredEvent[] = [];
    for (const resolved of batch) {
      if (!isLedgerEvent(resolved, this.options.streamPrefix)) continue;
      const event = toStoredEvent(resolved);
      // After a re-subscription the server starts strictly after this position; the check keeps
      // "exactly once" true even if a server ever sent the boundary event again.
      if (event.position <= this.position) continue;
      events.push(event);
    }
    if (events.length === 0) return;
    // Any event reaching us proves the subscription is up, even from a server that sends no confirmation.
    this.markLive();
    try {
      await this.options.handlers.onEvents(events);
    } catch (error) {
      throw new HandlerFailure(error);
    }
    this.position = events[events.length - 1].position;
  }

  private markLive(): void {
    if (this.state !== 'live') this.liveSince = Date.now();
    this.detail = undefined;
    this.setState('live');
  }

  /** Returns how long to wait before the next attempt. */
  private markDown(reason: string): number {
    // The backoff starts over only after the subscription stayed up longer than its longest delay,
    // so a server that accepts and then drops at once is not hammered at the shortest one.
    if (this.state === 'live' && Date.now() - this.liveSince > this.options.backoff.maxDelayMs) this.attempt = 0;
    this.attempt += 1;
    const delay = reconnectDelay(this.attempt, this.options.backoff);
    this.detail = `subscription to $all lost (${reason}); resubscribing from position ${this.position}, attempt ${this.attempt}`;
    this.setState('reconnecting', delay);
    return delay;
  }

  private stop(error: unknown): void {
    this.detail = error instanceof Error ? error.message : String(error);
    this.setState('stopped');
    if (!this.closed) this.options.handlers.onError?.(error instanceof Error ? error : new Error(String(error)));
  }

  private setState(state: SubscriptionState, retryInMs?: number): void {
    if (state === this.state && state !== 'reconnecting') return;
    this.state = state;
    this.options.onStatus({ ...this.status, retryInMs });
  }

  /** Waits out the backoff; close() cuts it short. */
  private pause(ms: number): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }
}

/** Cancels the call and detaches; late errors of a cancelled call are expected and ignored. */
function release(subscription: AllStreamSubscription): void {
  subscription.removeAllListeners('readable');
  subscription.on('error', () => undefined);
  subscription.unsubscribe().catch(() => undefined);
  subscription.destroy();
}
