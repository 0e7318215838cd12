import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { StoreHooks } from '../adapters/store.factory';

export const LEDGER_METRICS = Symbol('LEDGER_METRICS');

/**
 * What the command path tells these metrics. Defined here, so metrics import no ledger: the ledger
 * service's observer hook has this shape and is handed these where the application is put together.
 */
export interface LedgerActivityObserver {
  onAppended?(events: number, tenant: string): void;
  /** `where`: the operation the refused fact was for. */
  onRefused?(code: string, where: { tenant: string; operationRef: string }): void;
}

/** What the clock metrics read: the shape of the ledger clock's status, defined here so metrics import no clock. */
export interface ClockReading {
  offset_ms: number;
  steps_detected: number;
  /** The largest lead of one live instance's clock over another's seen (docs/reliability.md, "Instances agree on time"). */
  instance_skew_ms?: number;
  take_overs_held?: boolean;
}

export interface LedgerMetrics {
  observer: LedgerActivityObserver;
  storeHooks: StoreHooks;
  /** Exposes a clock's wall offset and detected steps (docs/reliability.md, "A stepped clock"). */
  watchClock(read: () => ClockReading): void;
}

/** Powers of two up to the adapter's largest group (256 appends by default). */
const GROUP_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/**
 * The command path's counters and the store's group-commit sizes, on the service's one registry.
 * Without a registry (a module test) the hooks do nothing, so the ledger never depends on metrics.
 */
export function createLedgerMetrics(registry: Registry | undefined): LedgerMetrics {
  if (!registry) return { observer: {}, storeHooks: {}, watchClock: () => undefined };
  // By tenant: a scrape by one tenant's admin shows its own series only (see metrics.ts).
  const appends = new Counter({
    name: 'ledger_appends_total',
    help: 'Accepted submits that appended events (refusals, recorded or not, are in ledger_refusals_total)',
    labelNames: ['tenant'],
    registers: [registry],
  });
  const events = new Counter({
    name: 'ledger_events_appended_total',
    help: 'Events appended (facts and the decisions they caused)',
    labelNames: ['tenant'],
    registers: [registry],
  });
  const refusals = new Counter({
    name: 'ledger_refusals_total',
    help: 'Facts the decider refused, by tenant and stable refusal code',
    labelNames: ['tenant', 'code'],
    registers: [registry],
  });
  const groupAppends = new Histogram({
    name: 'ledger_store_group_commit_appends',
    help: 'Appends that shared one commit (one fsync) in the embedded store',
    buckets: GROUP_BUCKETS,
    registers: [registry],
  });
  const groupEvents = new Histogram({
    name: 'ledger_store_group_commit_events',
    help: 'Events written by one commit in the embedded store',
    buckets: [...GROUP_BUCKETS, 512, 1024],
    registers: [registry],
  });
  // The client never re-subscribes by itself: the adapter does, and an outage shows here and on readiness.
  const subscriptionsDown = new Gauge({
    name: 'ledger_store_subscriptions_down',
    help: 'Log subscriptions currently down',
    registers: [registry],
  });
  const resubscriptions = new Counter({
    name: 'ledger_store_resubscriptions_total',
    help: 'Re-subscriptions to the log after a drop',
    registers: [registry],
  });
  const down = new Set<number>();
  let readClock: (() => ClockReading) | undefined;
  new Gauge({
    name: 'ledger_clock_wall_offset_seconds',
    help: 'Wall clock minus ledger time; decisions follow ledger time, which wall clock steps do not move',
    registers: [registry],
    collect() {
      if (readClock) this.set(readClock().offset_ms / 1000);
    },
  });
  new Gauge({
    name: 'ledger_clock_steps_detected',
    help: 'Wall clock steps seen since the process started (each also logged)',
    registers: [registry],
    collect() {
      if (readClock) this.set(readClock().steps_detected);
    },
  });
  new Gauge({
    name: 'ledger_clock_instance_skew_seconds',
    help: 'Largest lead of one live instance clock over another sharing the store, as seen through heartbeats (0 on one base)',
    registers: [registry],
    collect() {
      const reading = readClock?.();
      if (reading?.instance_skew_ms !== undefined) this.set(reading.instance_skew_ms / 1000);
    },
  });
  new Gauge({
    name: 'ledger_clock_take_overs_held',
    help: '1 while expired leases of another holder are not handed over: instance clocks disagree, or peers have not judged this clock yet',
    registers: [registry],
    collect() {
      const reading = readClock?.();
      if (reading?.take_overs_held !== undefined) this.set(reading.take_overs_held ? 1 : 0);
    },
  });
  return {
    watchClock: (read) => {
      readClock = read;
    },
    observer: {
      onAppended: (count, tenant) => {
        appends.inc({ tenant });
        events.inc({ tenant }, count);
      },
      onRefused: (code, where) => refusals.inc({ tenant: where.tenant, code }),
    },
    storeHooks: {
      onGroupCommitted: (appendCount, eventCount) => {
        groupAppends.observe(appendCount);
        groupEvents.observe(eventCount);
      },
      onSubscriptionStatus: (subscription, state) => {
        if (state === 'reconnecting') down.add(subscription);
        else if (down.delete(subscription) && state === 'live') resubscriptions.inc();
        subscriptionsDown.set(down.size);
      },
    },
  };
}
