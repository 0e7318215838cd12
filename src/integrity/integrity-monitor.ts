import { eventShapeProblem, LedgerProblem } from '@recovery-ledger/core';
import type { EventStore, StoredEvent } from '../store/event-store.port';
import { auditLog, type IntegrityFinding, type LogAudit } from './log-audit';
import type { StartCheck } from './checkpoint-keeper';
import { OPERATION_STREAM_PREFIX } from '../store/stream-names';
import type { RollbackFindingKind } from './history-rollback';
import type { BrokenStreams } from '../ledger/sealed-streams';

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
  /** The start-up check for a log rolled back to an older copy (docs/security.md, "A log rolled back"). */
  rollback?: RollbackStatus;
  /** The check of what followed the last verified checkpoint, before anything was served. */
  start_check?: StartCheck;
  /** The whole-log audit behind the service (docs/reliability.md, "Start-up without a full pass"). */
  audit?: { state: AuditState };
}

export type AuditState = 'not_started' | 'running' | 'verified' | 'broken' | 'failed' | 'off';

export interface RollbackStatus {
  /**
   * `checking` until the start-up check has read the store; `rolled_back` refuses every write;
   * `accepted` is an operator's LEDGER_ACCEPT_ROLLBACK over found evidence.
   */
  state: 'not_checked' | 'checking' | 'clear' | 'rolled_back' | 'accepted';
  /** What was found (kinds only: the details name operations, and go to the log). */
  evidence?: RollbackFindingKind[];
  /** Whether a head witness outside the data directory was compared. */
  witness?: boolean;
}

/** The ledger's own check of a stored event's shape: the one codec the folds use. */
export function ledgerEventProblem(event: StoredEvent): string | undefined {
  return event.stream.startsWith(OPERATION_STREAM_PREFIX)
    ? eventShapeProblem({ ...event, recorded_at: event.metadata.recorded_at })
    : undefined;
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
  private runningKeepsStreams = true;
  private rollback: RollbackStatus = { state: 'not_checked' };
  private startCheck: StartCheck | undefined;
  private auditState: AuditState = 'not_started';

  constructor(
    private readonly store: EventStore,
    private readonly now: () => Date,
    private readonly anchorKey?: string,
  ) {}

  reasonFor(stream: string): string | undefined {
    return this.broken.get(stream) ?? this.logFault;
  }

  current(): IntegrityStatus {
    return {
      ...this.status,
      rollback: this.rollback,
      ...(this.startCheck ? { start_check: this.startCheck } : {}),
      audit: { state: this.auditState },
    };
  }

  /** The audit behind the service was turned off (LEDGER_VERIFY_ON_START=off). */
  auditOff(): void {
    this.auditState = 'off';
  }

  setStartCheck(check: StartCheck): void {
    this.startCheck = check;
  }

  /**
   * Findings of a check of part of the log (what followed the verified checkpoint): the streams
   * named are refused at once, a finding about the log as a whole refuses every stream, and
   * readiness is down, as after an audit that found them.
   */
  refuse(findings: readonly IntegrityFinding[]): void {
    if (findings.length === 0) return;
    for (const finding of findings)
      if (finding.stream && !this.broken.has(finding.stream)) this.broken.set(finding.stream, finding.detail);
    this.logFault ??= findings.find((finding) => finding.stream === undefined)?.detail;
    this.status = {
      ...this.status,
      state: 'broken',
      checked_at: this.now().toISOString(),
      findings: (this.status.findings ?? 0) + findings.length,
      broken_streams: this.broken.size,
    };
  }

  setRollback(status: RollbackStatus): void {
    this.rollback = status;
  }

  /**
   * Why no write may be decided now, if none may: on a rolled-back log a step that succeeded
   * after the copy was taken reads as planned (or absent), and deciding on it would grant a
   * second dispatch of a write that already happened.
   */
  writeRefusal(): LedgerProblem | undefined {
    if (this.rollback.state === 'rolled_back') {
      return new LedgerProblem(
        'HISTORY_ROLLED_BACK',
        'the log was rolled back to an older copy: it is behind what this ledger has already recorded, so no write is decided on it. Nothing was stored; an operator must restore the newer log (or accept the rollback with LEDGER_ACCEPT_ROLLBACK)',
      );
    }
    if (this.rollback.state === 'checking') {
      return new LedgerProblem(
        'STORE_UNAVAILABLE',
        'the start-up check of the log against its witness has not finished; nothing was stored',
        { retryAfterSeconds: 2 },
      );
    }
    return undefined;
  }

  /**
   * Audits the whole log; a second call while one runs joins it. `pause` paces it (the audit behind
   * the service holds a bounded share of a core); an admin's audit runs unpaced.
   */
  verify(pause?: () => Promise<void>, { keepStreams = true }: { keepStreams?: boolean } = {}): Promise<LogAudit> {
    // One that lists every stream (an admin's) does not join one that keeps none (the audit behind
    // the service, whose memory must not grow with the streams): it runs once that one is done.
    if (this.running && (this.runningKeepsStreams || !keepStreams)) return this.running;
    if (this.running)
      return this.running.then(
        () => this.verify(pause, { keepStreams }),
        () => this.verify(pause, { keepStreams }),
      );
    this.runningKeepsStreams = keepStreams;
    // A log found broken before (by the start-up check) stays reported broken while it is audited again.
    if (this.status.state !== 'broken') this.status = { ...this.status, state: 'verifying' };
    this.auditState = 'running';
    this.running = auditLog(this.store, {
      anchorKey: this.anchorKey,
      checkEvent: ledgerEventProblem,
      keepStreams,
      ...(pause ? { pause } : {}),
    })
      .then(
        (audit) => {
          this.auditState = audit.ok ? 'verified' : 'broken';
          const broken = new Map<string, string>();
          for (const finding of audit.findings)
            if (finding.stream && !broken.has(finding.stream)) broken.set(finding.stream, finding.detail);
          this.broken = broken;
          this.logFault = audit.findings.find((finding) => finding.stream === undefined)?.detail;
          this.status = {
            state: audit.ok ? 'verified' : 'broken',
            checked_at: this.now().toISOString(),
            events: audit.events,
            streams: audit.stream_count,
            findings: audit.findings.length,
            broken_streams: audit.broken_streams.length,
            anchored: audit.anchored,
          };
          return audit;
        },
        (error: Error) => {
          this.auditState = 'failed';
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
