import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { percentile } from '@recovery-ledger/projections';
import type { TrustCounters, TrustMetricsDoc } from '@recovery-ledger/projections';
import { scrapeTenant } from './metrics';

/**
 * One projection's distance to the log, as these metrics read it. Defined here, so metrics import
 * no engine: the projection engine's lag report has this shape and is handed over where the
 * application is put together.
 */
export interface ProjectionLagReading {
  projection: string;
  /** The last log position applied. */
  checkpoint: number;
  /** Events not applied yet; null where the store cannot count them (positions that are not a count). */
  events_behind: number | null;
  /** Age of the oldest event not applied yet (0 when caught up). */
  ms_behind: number;
}

export interface ProjectionMetricsSource {
  lag(): Promise<ProjectionLagReading[]>;
  /** The engine's state; `failed` while it waits to follow the log again. */
  status(): { state: string };
  trustDocs(tenant?: string): TrustMetricsDoc[];
  /** Each commit's time to readable, where the engine sees this process's commits (see ProjectionRunner). */
  onReadable?(listener: (ms: number) => void): void;
}

/** Fine below 50 ms, where a read-your-writes wait under load lives; coarse up to a stalled engine. */
const READABLE_BUCKETS_SECONDS = [
  0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1, 5, 30,
];

/** One read per scrape even though several metrics need it: collectors of one scrape share it. */
function perScrape<K, T>(ttlMs: number, read: (key: K) => Promise<T> | T): (key: K) => Promise<T> {
  const cache = new Map<K, { at: number; value: Promise<T> }>();
  return (key) => {
    const now = Date.now();
    const hit = cache.get(key);
    if (hit && now - hit.at < ttlMs) return hit.value;
    const value = Promise.resolve().then(() => read(key));
    cache.set(key, { at: now, value });
    // Keep the map small: drop entries of tenants not scraped lately.
    for (const [other, entry] of cache) if (now - entry.at >= ttlMs) cache.delete(other);
    return value;
  };
}

const TRUST_COUNTERS: ReadonlyArray<{ name: string; help: string; field: keyof TrustCounters }> = [
  {
    name: 'ledger_trust_unknown_outcomes_total',
    help: 'Outcomes that had to be verified (unknown envelope or in-flight attempt verified)',
    field: 'unknown_outcomes',
  },
  {
    name: 'ledger_trust_duplicate_writes_prevented_total',
    help: 'Dispatches on a succeeded step answered with the original success',
    field: 'duplicate_writes_prevented',
  },
  {
    name: 'ledger_trust_identical_retries_blocked_total',
    help: 'Dispatches refused as UNCHANGED_RETRY after correct_input',
    field: 'identical_retries_blocked',
  },
  {
    name: 'ledger_trust_unverified_dispatches_refused_total',
    help: 'Dispatches refused while an attempt was in flight or unverified',
    field: 'unverified_dispatches_refused',
  },
  {
    name: 'ledger_trust_possible_duplicates_total',
    help: 'Late outcomes that may have reached the provider, reported by an attempt after a later attempt was granted: the provider may hold two writes',
    field: 'possible_duplicates',
  },
  {
    name: 'ledger_trust_manually_verified_found_committed_total',
    help: 'Unknown outcomes a person settled as committed (OutcomeVerifiedManually)',
    field: 'manually_verified_found_committed',
  },
  {
    name: 'ledger_trust_manually_verified_not_found_total',
    help: 'Unknown outcomes a person settled as not committed (OutcomeVerifiedManually)',
    field: 'manually_verified_not_found',
  },
  {
    name: 'ledger_trust_terminal_escalations_total',
    help: 'Steps that escalated (terminal)',
    field: 'terminal_escalations',
  },
  { name: 'ledger_trust_operations_planned_total', help: 'Operations planned', field: 'operations_planned' },
];

const QUANTILES = [0.5, 0.9, 0.99] as const;

/**
 * Projection lag and the trust metrics, read from the engine and the read model when Prometheus
 * scrapes. The trust figures come from the projection, so they are as exact as the read model and
 * survive restarts; they are counters because they only grow (a rebuild starts them again from
 * zero, which Prometheus treats as a counter reset). Lag is in seconds, Prometheus' base unit.
 */
export function registerProjectionMetrics(registry: Registry, source: ProjectionMetricsSource): void {
  const lag = perScrape<'all', ProjectionLagReading[]>(250, () => source.lag());
  const trust = perScrape<string, TrustMetricsDoc[]>(250, (tenant) =>
    source.trustDocs(tenant === '*' ? undefined : tenant),
  );
  const trustForScrape = () => trust(scrapeTenant() ?? '*');

  if (source.onReadable) {
    const readable = new Histogram({
      name: 'ledger_projection_readable_seconds',
      help: 'From a commit of this process to every read model showing it (the lag a wait_for_position read waits out)',
      buckets: READABLE_BUCKETS_SECONDS,
      registers: [registry],
    });
    source.onReadable((ms) => readable.observe(ms / 1000));
  }

  new Gauge({
    name: 'ledger_projection_lag_events',
    help: 'Events the projection has not applied yet (absent while behind on a store that cannot count them: EventStoreDB)',
    labelNames: ['projection'],
    registers: [registry],
    async collect() {
      this.reset();
      // No sample rather than a wrong one: a difference of EventStoreDB positions is bytes, not events.
      for (const entry of await lag('all'))
        if (entry.events_behind !== null) this.set({ projection: entry.projection }, entry.events_behind);
    },
  });
  new Gauge({
    name: 'ledger_projection_lag_seconds',
    help: 'Age of the oldest event the projection has not applied yet',
    labelNames: ['projection'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const entry of await lag('all')) this.set({ projection: entry.projection }, entry.ms_behind / 1000);
    },
  });
  new Gauge({
    name: 'ledger_projection_checkpoint_position',
    help: 'Last log position the projection applied',
    labelNames: ['projection'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const entry of await lag('all')) this.set({ projection: entry.projection }, entry.checkpoint);
    },
  });
  new Gauge({
    name: 'ledger_projection_engine_failed',
    help: '1 while the projection engine is failed and waiting to follow the log again',
    registers: [registry],
    collect() {
      this.set(source.status().state === 'failed' ? 1 : 0);
    },
  });

  for (const { name, help, field } of TRUST_COUNTERS) {
    new Counter({
      name,
      help,
      labelNames: ['tenant', 'tool'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const doc of await trustForScrape()) this.inc({ tenant: doc.tenant, tool: doc.tool }, doc[field] ?? 0);
      },
    });
  }
  new Counter({
    name: 'ledger_trust_verifications_total',
    help: 'Verifications by outcome: found_committed, not_found, lookup_unavailable',
    labelNames: ['tenant', 'tool', 'outcome'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const doc of await trustForScrape()) {
        const labels = { tenant: doc.tenant, tool: doc.tool };
        this.inc({ ...labels, outcome: 'found_committed' }, doc.verified_found_committed);
        this.inc({ ...labels, outcome: 'not_found' }, doc.verified_not_found);
        this.inc({ ...labels, outcome: 'lookup_unavailable' }, doc.lookup_unavailable);
      }
    },
  });
  new Gauge({
    name: 'ledger_trust_pending_recovery_operations',
    help: 'Operations in pending recovery now (outcome unknown, not yet verified)',
    labelNames: ['tenant', 'tool'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const doc of await trustForScrape())
        this.set({ tenant: doc.tenant, tool: doc.tool }, doc.pending_recovery_now);
    },
  });
  new Gauge({
    name: 'ledger_trust_pending_recovery_quantile_seconds',
    help: 'Time from an unknown outcome to its verification, by quantile (within about 9%)',
    labelNames: ['tenant', 'tool', 'quantile'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const doc of await trustForScrape()) {
        if (doc.pending_recovery.count === 0) continue;
        for (const q of QUANTILES) {
          this.set(
            { tenant: doc.tenant, tool: doc.tool, quantile: String(q) },
            percentile(doc.pending_recovery, q) / 1000,
          );
        }
      }
    },
  });
  new Counter({
    name: 'ledger_trust_pending_recovery_seconds_total',
    help: 'Total time spent in pending recovery by resolved operations',
    labelNames: ['tenant', 'tool'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const doc of await trustForScrape())
        this.inc({ tenant: doc.tenant, tool: doc.tool }, doc.pending_recovery.sum_ms / 1000);
    },
  });
  new Counter({
    name: 'ledger_trust_pending_recovery_resolved_total',
    help: 'Pending recoveries resolved by a verification',
    labelNames: ['tenant', 'tool'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const doc of await trustForScrape())
        this.inc({ tenant: doc.tenant, tool: doc.tool }, doc.pending_recovery.count);
    },
  });
}
