import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { LedgerObserver } from '../ledger/ledger.service';
import type { StoreHooks } from '../store/store.factory';

export const LEDGER_METRICS = Symbol('LEDGER_METRICS');

export interface LedgerMetrics {
  observer: LedgerObserver;
  storeHooks: StoreHooks;
}

/** Powers of two up to the adapter's largest group (256 appends by default). */
const GROUP_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/**
 * The command path's counters and the store's group-commit sizes, on the service's one registry.
 * Without a registry (a module test) the hooks do nothing, so the ledger never depends on metrics.
 */
export function createLedgerMetrics(registry: Registry | undefined): LedgerMetrics {
  if (!registry) return { observer: {}, storeHooks: {} };
  // By tenant: a scrape by one tenant's admin shows its own series only (see metrics.ts).
  const appends = new Counter({
    name: 'ledger_appends_total',
    help: 'Accepted submits that appended events (refusals, recorded or not, are in ledger_refusals_total)',
    labelNames: ['tenant'],
    registers: [registry],
  });
  const events = new Counter({ name: 'ledger_events_appended_total', help: 'Events appended (facts and the decisions they caused)', labelNames: ['tenant'], registers: [registry] });
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
  const subscriptionsDown = new Gauge({ name: 'ledger_store_subscriptions_down', help: 'Log subscriptions currently down', registers: [registry] });
  const resubscriptions = new Counter({ name: 'ledger_store_resubscriptions_total', help: 'Re-subscriptions to the log after a drop', registers: [registry] });
  const down = new Set<number>();
  return {
    observer: {
      onAppended: (count, tenant) => {
        appends.inc({ tenant });
        events.inc({ tenant }, count);
      },
      onRefused: (code, tenant) => refusals.inc({ tenant, code }),
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
