import { Inject, Logger, Optional, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Registry } from 'prom-client';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { failureFields } from '../logging/failure-log';
import { registerIntegrityMetrics } from '../observability/integrity-metrics';
import { METRICS_REGISTRY } from '../observability/metrics';
import { EVENT_STORE, StoreUnavailableError, type EventStore } from '../store/event-store.port';
import { CheckpointKeeper } from './checkpoint-keeper';
import { CpuShare } from './cpu-share';
import { HistoryRollbackCheck } from './history-rollback.check';
import { IntegrityMonitor } from './integrity-monitor';

/**
 * The log's audit at start (docs/security.md), not awaited so a long log does not hold the server
 * back and paced to a share of one core, the verified checkpoint kept moving with the log, and at
 * shutdown the checkpoint's and the head witness's last writes before the store closes.
 */
/** The first wait before an audit the store's outage stopped is run again, doubled each time up to the last. */
const AUDIT_RETRY_FIRST_MS = 1_000;
const AUDIT_RETRY_LAST_MS = 30_000;

export class StoreLifecycle implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Integrity');
  private auditRetry: NodeJS.Timeout | undefined;
  private stopping = false;

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(IntegrityMonitor) private readonly integrity: IntegrityMonitor,
    @Inject(CONFIG) private readonly config: LedgerConfig,
    @Inject(HistoryRollbackCheck) private readonly rollback: HistoryRollbackCheck,
    @Inject(CheckpointKeeper) private readonly keeper: CheckpointKeeper,
    @Optional() @Inject(METRICS_REGISTRY) registry?: Registry,
  ) {
    if (registry)
      registerIntegrityMetrics(registry, {
        eventsRead: () => eventsReadBy(store),
        auditState: () => integrity.current().audit?.state ?? 'not_started',
        startCheckEventsRead: () => {
          const check = integrity.current().start_check;
          return check && check.state !== 'no_checkpoint' ? check.events_read : undefined;
        },
        verifiedPosition: () => keeper.checkpoint?.position,
      });
  }

  onApplicationBootstrap(): void {
    if (!this.config.verifyOnStart) {
      this.integrity.auditOff();
      this.logger.warn(
        'LEDGER_VERIFY_ON_START=off: the log is not audited at start; each decision still checks its own stream',
      );
      return;
    }
    this.keeper.start();
    this.audit(AUDIT_RETRY_FIRST_MS);
  }

  /**
   * Not awaited: a long log must not hold the server back. Each decision checks its own stream's
   * chain and anchored head meanwhile; the audit adds what only the whole log shows, on a bounded
   * share of one core (docs/reliability.md, "Start-up without a full pass"). An audit the store's
   * outage cut short is run again once the store may be back, so readiness does not stay down on
   * an outage that has ended; any other failure stays reported until a person audits again.
   */
  private audit(nextRetryMs: number): void {
    const pace = new CpuShare(this.config.auditCpuShare);
    this.integrity
      // Only counted, not listed: a list of every stream would grow with the log (docs/scaling.md, "Memory").
      .verify(() => pace.pause(), { keepStreams: false })
      .then(
        async (audit) => {
          await this.keeper.afterAudit(audit);
          if (audit.ok)
            this.logger.log(
              { events: audit.events, streams: audit.stream_count, anchored: audit.anchored },
              'the log verified',
            );
          else
            this.logger.error(
              {
                findings: audit.findings.length,
                broken_streams: audit.broken_streams.length,
                kinds: [...new Set(audit.findings.map((finding) => finding.kind))],
              },
              'THE LOG FAILED VERIFICATION: appends to the broken streams are refused; run `recovery-ledger verify` for the details',
            );
        },
        (error: Error) => {
          const unavailable = error instanceof StoreUnavailableError;
          this.logger.error(
            { ...failureFields(error), ...(unavailable ? { retry_in_ms: nextRetryMs } : {}) },
            'the log could not be audited',
          );
          if (!unavailable || this.stopping) return;
          this.auditRetry = setTimeout(
            () => this.audit(Math.min(nextRetryMs * 2, AUDIT_RETRY_LAST_MS)),
            nextRetryMs,
          ).unref();
        },
      );
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.auditRetry);
    // The HTTP server has stopped taking requests; queued appends commit before the file closes.
    // The checkpoint moves up to the head first, so the next start checks nothing it has seen.
    await this.keeper
      .stop()
      .catch((error: Error) =>
        this.logger.warn({ err: error }, 'the verified checkpoint could not be moved up at shutdown'),
      );
    await this.rollback.stop();
    await this.store.close();
  }
}

/** Events the store has decoded, where it counts them (the embedded store does). */
function eventsReadBy(store: EventStore): number {
  const counted = (store as { eventsRead?: unknown }).eventsRead;
  return typeof counted === 'number' ? counted : 0;
}
