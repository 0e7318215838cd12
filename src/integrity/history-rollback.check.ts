import { Inject, Logger, Optional, type OnModuleInit } from '@nestjs/common';
import { Counter, Gauge, type Registry } from 'prom-client';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { FailureLog } from '../logging/failure-log';
import { METRICS_REGISTRY } from '../observability/metrics';
import { CLOCK, type Clock } from '../shared/clock';
import { EVENT_STORE, type EventStore } from '../store/event-store.port';
import { HeadWitnessWriter } from './head-witness-writer';
import { findRollback, lowerWebhookCheckpoint } from './history-rollback';
import { IntegrityMonitor } from './integrity-monitor';

/**
 * The start-up check for a log rolled back to an older copy (docs/security.md, "A log rolled
 * back"), awaited before the server listens: it reads a few rows, not the log. Until it has
 * answered no write is decided; on evidence of a rollback none is until an operator acts.
 */
export class HistoryRollbackCheck implements OnModuleInit {
  private readonly logger = new Logger('Integrity');
  // Asked again every two seconds while the store is down: see FailureLog.
  private readonly failures = new FailureLog(this.logger);
  private writer: HeadWitnessWriter | undefined;
  private retry: NodeJS.Timeout | undefined;
  private readonly accepted: Counter | undefined;
  private readonly rolledBack: Gauge | undefined;

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(IntegrityMonitor) private readonly integrity: IntegrityMonitor,
    @Inject(CONFIG) private readonly config: LedgerConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    @Optional() @Inject(METRICS_REGISTRY) registry?: Registry,
  ) {
    if (registry) {
      this.accepted = new Counter({
        name: 'ledger_history_rollbacks_accepted_total',
        help: 'Starts on a log found rolled back that an operator accepted with LEDGER_ACCEPT_ROLLBACK',
        registers: [registry],
      });
      this.rolledBack = new Gauge({
        name: 'ledger_history_rolled_back',
        help: '1 while writes are refused because the log was found rolled back to an older copy',
        registers: [registry],
      });
    }
  }

  async onModuleInit(): Promise<void> {
    this.integrity.setRollback({ state: 'checking' });
    await this.check();
  }

  private async check(): Promise<void> {
    const { config } = this;
    let report;
    try {
      report = await findRollback(this.store, {
        dataDir: config.dataDir,
        witnessFile: config.headWitnessFile,
        anchorKey: config.anchorKey,
      });
    } catch (error) {
      // A store that cannot be read yet (EventStoreDB starting) is asked again; writes wait meanwhile.
      this.failures.failed(
        error,
        'the log could not be checked for a rollback; writes wait, and the check runs again shortly',
      );
      this.retry = setTimeout(() => void this.check(), 2000);
      this.retry.unref();
      return;
    }
    const witness = config.headWitnessFile !== undefined;
    const evidence = report.findings.map((finding) => finding.kind);
    const head = { position: report.head.position, events: report.head.events };
    // The default witness (docs/operations.md, "A log restored from an older copy") takes an empty
    // log as a data directory wiped on purpose and starts again from it; an older copy that holds
    // anything is still refused. A witness set by LEDGER_HEAD_WITNESS_FILE refuses this too.
    const newLog =
      config.headWitnessByDefault &&
      report.head.position === 0 &&
      report.findings.length > 0 &&
      report.findings.every((finding) => finding.kind === 'log_behind_witness');
    if (newLog)
      this.logger.warn(
        { file: config.headWitnessFile, witness_position: report.witness?.position },
        'the log is empty where the default head witness recorded events: a new log is started and the witness with it (set LEDGER_HEAD_WITNESS_FILE to refuse an emptied data directory too)',
      );
    if (report.findings.length === 0 || newLog) {
      this.integrity.setRollback({ state: 'clear', witness });
      this.rolledBack?.set(0);
      if (witness && !report.witness)
        this.logger.warn(
          { file: config.headWitnessFile, head },
          'no head witness yet: one is started from the log as it stands',
        );
      if (!witness)
        this.logger.warn(
          'no head witness is kept (LEDGER_HEAD_WITNESS_FILE off or unset, or the default state directory not writable): a restore of the whole data directory from an older copy cannot be seen',
        );
      await this.startWitness();
      return;
    }
    if (config.acceptRollback) {
      this.logger.warn(
        { evidence: report.findings, head, reason: config.acceptRollback.reason },
        'LOG ROLLBACK ACCEPTED (LEDGER_ACCEPT_ROLLBACK=1): the older log is kept, the read models are rebuilt from it, the head witness is reset to it; what stood after it is lost. Unset LEDGER_ACCEPT_ROLLBACK once started',
      );
      this.accepted?.inc();
      this.rolledBack?.set(0);
      lowerWebhookCheckpoint(config.dataDir, report.head.position);
      this.integrity.setRollback({ state: 'accepted', evidence, witness });
      await this.startWitness();
      return;
    }
    this.rolledBack?.set(1);
    this.integrity.setRollback({ state: 'rolled_back', evidence, witness });
    this.logger.error(
      { evidence: report.findings, head },
      'THE LOG WAS ROLLED BACK to an older copy: every write is refused (503 HISTORY_ROLLED_BACK) and the read models are kept as they are. Restore the newer log, or start with LEDGER_ACCEPT_ROLLBACK=1 and LEDGER_ACCEPT_ROLLBACK_REASON to keep this one',
    );
  }

  private async startWitness(): Promise<void> {
    const file = this.config.headWitnessFile;
    if (!file) return;
    this.writer = new HeadWitnessWriter({
      store: this.store,
      file,
      intervalMs: this.config.headWitnessIntervalMs,
      anchorKey: this.config.anchorKey,
      now: () => this.clock.now(),
      onError: (error) =>
        this.logger.error(
          { err: error, file },
          'the head witness could not be written: a rollback past this point would not be seen',
        ),
    });
    await this.writer.start();
  }

  /** The last witness write, before the store closes. */
  async stop(): Promise<void> {
    if (this.retry) clearTimeout(this.retry);
    await this.writer?.stop();
  }
}
