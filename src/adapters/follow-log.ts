import {
  StoreUnavailableError,
  type StoredEvent,
  type Subscription,
  type SubscriptionHandlers,
} from '../store/event-store.port';

/** What a store gives a follower of its log: reads after a position, and a way to wait for more. */
export interface LogSource {
  /** The next batch after `after` (exclusive), in log order. */
  read(after: number): Promise<StoredEvent[]>;
  /** Resolves when more may have come (a notification, or the poll interval), or when `stopped()` at a wake. */
  wait(stopped: () => boolean): Promise<void>;
  /** Cuts every wait short (the subscription is closing). */
  wake(): void;
  /** The store itself closed: an unavailable read then ends the feed instead of being tried again. */
  closed(): boolean;
}

/**
 * The catch-up-then-live loop every polling adapter's `subscribe` runs (event-store.port.ts): read
 * after the last position handed on, hand the batch on and wait for it, and wait for more when
 * there is none. A store briefly unavailable is read again at the next wake, never the end of the feed.
 */
export function followLog(after: number, handlers: SubscriptionHandlers, source: LogSource): Subscription {
  let active = true;
  let position = after;
  const stopped = () => !active;
  const loop = (async () => {
    while (active) {
      let batch: StoredEvent[];
      try {
        batch = await source.read(position);
      } catch (error) {
        if (!active) return;
        if (error instanceof StoreUnavailableError && !source.closed()) {
          await source.wait(stopped);
          continue;
        }
        handlers.onError?.(error as Error);
        return;
      }
      if (batch.length === 0) {
        await source.wait(stopped);
        continue;
      }
      try {
        await handlers.onEvents(batch);
      } catch (error) {
        if (active) handlers.onError?.(error as Error);
        return;
      }
      position = batch[batch.length - 1].position;
    }
  })();
  return {
    close: async () => {
      active = false;
      source.wake();
      await loop;
    },
  };
}
