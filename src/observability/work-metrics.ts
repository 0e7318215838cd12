import { Counter, Gauge, type Registry } from 'prom-client';
import type { WorkKind } from '@recovery-ledger/core';
import { scrapeTenant } from './metrics';

export interface WorkMetricsSource {
  /** Due items per tool and the oldest due instant (epoch ms), of one tenant or of all. */
  depth(tenant: string | undefined): Array<{ tool: string; depth: number; oldestDueMs: number | null }>;
  now(): number;
}

export interface WorkMetricsObserver {
  onLeaseExpired(tool: string): void;
  onHandover(tool: string): void;
  onGranted(tool: string, kind: WorkKind): void;
}

/**
 * The work feed on /metrics: how much is due per tool and how long the oldest due item has waited
 * (read from the step-state read model at scrape, scoped to the scraping tenant), and the leases
 * that expired in a worker's hands and the items handed to another worker (counted as they happen,
 * in this instance).
 */
export function registerWorkMetrics(registry: Registry, source: WorkMetricsSource): WorkMetricsObserver {
  new Gauge({
    name: 'ledger_work_feed_depth',
    help: 'Steps due on the work feed now (dispatch or verify), held or not, per tool',
    labelNames: ['tool'],
    registers: [registry],
    collect() {
      this.reset();
      for (const row of source.depth(scrapeTenant())) this.set({ tool: row.tool }, row.depth);
    },
  });
  new Gauge({
    name: 'ledger_work_feed_oldest_due_seconds',
    help: 'How long the oldest due step of the tool has been due',
    labelNames: ['tool'],
    registers: [registry],
    collect() {
      this.reset();
      const now = source.now();
      for (const row of source.depth(scrapeTenant())) {
        if (row.oldestDueMs !== null) this.set({ tool: row.tool }, Math.max(0, now - row.oldestDueMs) / 1000);
      }
    },
  });
  const granted = new Counter({
    name: 'ledger_work_items_granted_total',
    help: 'Work items handed out under a lease, by tool and kind (dispatch, verify)',
    labelNames: ['tool', 'kind'],
    registers: [registry],
  });
  const expired = new Counter({
    name: 'ledger_work_lease_expiries_total',
    help: "Leases that ended by expiry in a worker's hands (neither released nor renewed) and were taken over",
    labelNames: ['tool'],
    registers: [registry],
  });
  const handovers = new Counter({
    name: 'ledger_work_lease_handovers_total',
    help: 'Items granted to another worker than the one that held them last',
    labelNames: ['tool'],
    registers: [registry],
  });
  return {
    onLeaseExpired: (tool) => expired.inc({ tool }),
    onHandover: (tool) => handovers.inc({ tool }),
    onGranted: (tool, kind) => granted.inc({ tool, kind }),
  };
}
