import { Inject, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { EVENT_STORE, type EventStore } from '../store/event-store.port';
import { HistoryRollbackCheck } from './history-rollback.check';
import { IntegrityMonitor } from './integrity-monitor';

/**
 * The log's audit at start (docs/security.md), not awaited so a long log does not hold the server
 * back, and at shutdown the head witness's last write before the store closes.
 */
export class StoreLifecycle implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Integrity');

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(IntegrityMonitor) private readonly integrity: IntegrityMonitor,
    @Inject(CONFIG) private readonly config: LedgerConfig,
    @Inject(HistoryRollbackCheck) private readonly rollback: HistoryRollbackCheck,
  ) {}

  onApplicationBootstrap(): void {
    if (!this.config.verifyOnStart) {
      this.logger.warn(
        'LEDGER_VERIFY_ON_START=off: the log is not audited at start; each decision still checks its own stream',
      );
      return;
    }
    // Not awaited: a long log must not hold the server back. Each decision checks its own stream's
    // chain and anchored head meanwhile; the audit adds what only the whole log shows.
    this.integrity.verify().then(
      (audit) => {
        if (audit.ok)
          this.logger.log(
            { events: audit.events, streams: audit.streams.length, anchored: audit.anchored },
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
      (error: Error) => this.logger.error({ err: error }, 'the log could not be audited'),
    );
  }

  async onApplicationShutdown(): Promise<void> {
    // The HTTP server has stopped taking requests; queued appends commit before the file closes.
    await this.rollback.stop();
    await this.store.close();
  }
}
