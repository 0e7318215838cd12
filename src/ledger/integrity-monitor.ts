import { eventShapeProblem } from '../domain/event-codec';
import type { EventStore, StoredEvent } from '../store/event-store.port';
import { auditLog, type LogAudit } from '../store/log-audit';
import { OPERATION_STREAM_PREFIX } from '../store/stream-names';
import type { BrokenStreams } from './sealed-streams';

export type IntegrityState = 'not_checked' | 'verifying' | 'verified' | 'broken' | 'unverifiable';

export interface IntegrityStatus {
  state: IntegrityState;
  /** When the last audit finished (ledger clock), if one has. */
  checked_at?: string;
  events?: number;
  streams?: number;
  findings?: number;
  broken_streams?: number;
  /** Whether the store keeps anchors (a cut tail or a deleted stream is only seen where it does). */
  anchored?: boolean;
  /** Why the audit could not run, when it could not. */
  error?: string;
}

/** The ledger's own check of a stored event's shape: the one codec the folds use. */
export function ledgerEventProblem(event: StoredEvent): string | undefined {
  return event.stream.startsWith(OPERATION_STREAM_PREFIX) ? eventShapeProblem({ ...event, recorded_at: event.metadata.recorded_at }) : undefined;
}

/**
 * Holds what the last whole-log audit found (docs/reliability.md): streams found broken are
 * refused by the ledger before the store is asked, readiness reports the state, and an admin can
 * run the audit again. The audit runs at start in the background; until it ends, every decision
 * still checks its own stream's chain and anchored head.
 */
export class IntegrityMonitor implements BrokenStreams {
  private status: IntegrityStatus = { state: 'not_checked' };
  private broken = new Map<string, string>();
  /** A finding about the log as a whole: no stream's history can then be told true. */
  private logFault: string | undefined;
  private running: Promise<LogAudit> | undefined;

  constructor(
    private readonly store: EventStore,
    private readonly now: () => Date,
    private readonly anchorKey?: string,
  ) {}

  reasonFor(stream: string): string | undefined {
    return this.broken.get(stream) ?? this.logFault;
  }

  current(): IntegrityStatus {
    return this.status;
  }

  /** Audits the whole log; a second call while one runs joins it. */
  verify(): Promise<LogAudit> {
    if (this.running) return this.running;
    this.status = { ...this.status, state: 'verifying' };
    this.running = auditLog(this.store, { anchorKey: this.anchorKey, checkEvent: ledgerEventProblem })
      .then(
        (audit) => {
          const broken = new Map<string, string>();
          for (const finding of audit.findings) if (finding.stream && !broken.has(finding.stream)) broken.set(finding.stream, finding.detail);
          this.broken = broken;
          this.logFault = audit.findings.find((finding) => finding.stream === undefined)?.detail;
          this.status = {
            state: audit.ok ? 'verified' : 'broken',
            checked_at: this.now().toISOString(),
            events: audit.events,
            streams: audit.streams.length,
            findings: audit.findings.length,
            broken_streams: audit.broken_streams.length,
            anchored: audit.anchored,
          };
          return audit;
        },
        (error: Error) => {
          this.status = { state: 'unverifiable', checked_at: this.now().toISOString(), error: error.message };
          throw error;
        },
      )
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }
}
