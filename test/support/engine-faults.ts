/**
 * Faults for the projection engine, injected around its two real ports rather than through an
 * option of the engine: the read model (SQLite, real) and the event store (real).
 *
 * - `beforeCommit` runs inside the transaction that carries a batch's checkpoints, so a throw (or a
 *   SIGKILL) there rolls the whole batch back, documents and checkpoints together.
 * - `afterCommit` runs once that transaction is durable. A throw stops the engine there, as a crash
 *   would; a promise it returns is awaited before the engine reads the log again, so a test can
 *   act between two batches (another engine moving the same read model, say).
 *
 * What a batch covered is taken from what the engine read from the store since its previous
 * transaction (the events it folded), so `from`, `to` and `events` are the engine's own reads, not
 * figures the wrapper works out from positions. One lane at a time: a live lane and a rebuild
 * reading through the same wrapped store would mix their reads.
 */
import type { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import type { EventStore, StoredEvent, Subscription, SubscriptionHandlers } from '../../src/store/event-store.port';

export interface BatchInfo {
  /** Positions of the first and last events folded into the batch. */
  from: number;
  to: number;
  events: number;
  /** The projections whose checkpoints the batch moved. */
  projections: readonly string[];
}

export interface EngineFaults {
  beforeCommit?(batch: BatchInfo): void;
  afterCommit?(batch: BatchInfo): void | Promise<void>;
}

export interface FaultyPorts {
  store: EventStore;
  readModel: SqliteReadModel;
}

/** The store and read model to hand the engine, with the faults around them. */
export function withEngineFaults(store: EventStore, readModel: SqliteReadModel, faults: EngineFaults): FaultyPorts {
  let read: StoredEvent[] = [];
  let moved: string[] | undefined;
  /** The afterCommit still running: the next read of the log waits for it. */
  let pending: Promise<void> = Promise.resolve();

  const noteRead = (events: StoredEvent[]) => {
    read.push(...events);
  };
  const settled = async () => {
    const waiting = pending;
    pending = Promise.resolve();
    await waiting;
  };

  const transaction = <T>(work: () => T): T => {
    moved = [];
    let info: BatchInfo | undefined;
    let result: T;
    try {
      result = readModel.transaction(() => {
        const value = work();
        const names = moved ?? [];
        if (names.length > 0 && read.length > 0) {
          info = {
            from: read[0].position,
            to: read[read.length - 1].position,
            events: read.length,
            projections: names,
          };
          faults.beforeCommit?.(info);
        }
        return value;
      });
    } finally {
      moved = undefined;
      read = [];
    }
    if (info) {
      const after = faults.afterCommit?.(info);
      if (after) pending = after;
    }
    return result;
  };

  const setCheckpoint: SqliteReadModel['setCheckpoint'] = (name, position, recordedAt, eventHash) => {
    readModel.setCheckpoint(name, position, recordedAt, eventHash);
    moved?.push(name);
  };

  const faultyReadModel = new Proxy(readModel, {
    get(target, property) {
      if (property === 'transaction') return transaction;
      if (property === 'setCheckpoint') return setCheckpoint;
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });

  const faultyStore = new Proxy(store, {
    get(target, property) {
      if (property === 'readAll') {
        return async (options: Parameters<EventStore['readAll']>[0]) => {
          await settled();
          const events = await target.readAll(options);
          noteRead(events);
          return events;
        };
      }
      if (property === 'subscribe') {
        return (options: Parameters<EventStore['subscribe']>[0], handlers: SubscriptionHandlers): Subscription =>
          target.subscribe(options, {
            ...handlers,
            onEvents: async (events) => {
              await settled();
              noteRead(events);
              await handlers.onEvents(events);
            },
          });
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });

  return { store: faultyStore, readModel: faultyReadModel };
}
