import { Counter, Gauge, type Registry } from 'prom-client';

/** What these metrics read of the integrity checks (docs/reliability.md, "Start-up without a full pass"). */
export interface IntegrityMetricsSource {
  /** Events the store of the thread that answers requests has decoded since it opened. */
  eventsRead(): number;
  /** The whole-log audit's state (`not_started`, `running`, `verified`, `broken`, `failed`, `off`). */
  auditState(): string;
  /** Events the start-up check read (what followed the last verified checkpoint); undefined before it ran. */
  startCheckEventsRead(): number | undefined;
  /** The log position of the last verified checkpoint; undefined without one. */
  verifiedPosition(): number | undefined;
}

const AUDIT_STATES = ['not_started', 'running', 'verified', 'broken', 'failed', 'off'];

/**
 * What a start cost and how far the log is verified, on the service's registry: every event the
 * store decoded (what a start reads is counted, not timed), the audit behind the service, and the
 * checkpoint it moves.
 */
export function registerIntegrityMetrics(registry: Registry, source: IntegrityMetricsSource): void {
  let counted = 0;
  new Counter({
    name: 'ledger_store_events_read_total',
    help: 'Events the store decoded for this process (reads, decisions, the start-up check and the audit)',
    registers: [registry],
    collect() {
      const now = source.eventsRead();
      if (now > counted) this.inc(now - counted);
      counted = now;
    },
  });
  new Gauge({
    name: 'ledger_integrity_audit_state',
    help: 'The whole-log audit behind the service: 1 for its current state',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const current = source.auditState();
      for (const state of AUDIT_STATES) this.set({ state }, state === current ? 1 : 0);
    },
  });
  new Gauge({
    name: 'ledger_integrity_start_check_events_read',
    help: 'Events the start-up integrity check read: those appended after the last verified checkpoint',
    registers: [registry],
    collect() {
      const read = source.startCheckEventsRead();
      if (read !== undefined) this.set(read);
    },
  });
  new Gauge({
    name: 'ledger_integrity_verified_position',
    help: 'The log position up to which the log was last verified (the verified checkpoint)',
    registers: [registry],
    collect() {
      const position = source.verifiedPosition();
      if (position !== undefined) this.set(position);
    },
  });
}
