import {
  Inject,
  Logger,
  Module,
  Optional,
  type DynamicModule,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { Counter, Gauge, type Registry } from 'prom-client';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { createLedgerMetrics, LEDGER_METRICS, type LedgerMetrics } from '../observability/ledger-metrics';
import { METRICS_REGISTRY } from '../observability/metrics';
import { EVENT_STORE, type EventStore } from '../store/event-store.port';
import { openEventStore, openTimeBaseStore } from '../adapters/store.factory';
import { CLOCK, type Clock } from '../shared/clock';
import { HeadWitnessWriter } from '../integrity/head-witness-writer';
import { findRollback, lowerWebhookCheckpoint } from '../integrity/history-rollback';
import { INSTANCE_CLOCKS, InstanceClocks, loadClockSettings } from './instance-clocks';
import { IntegrityMonitor } from '../integrity/integrity-monitor';
import { LedgerService, type LedgerObserver } from './ledger.service';
import { SubmitCommandHandler } from './submit-command.handler';
import { stepIndexer } from './step-index';
import { FailureLog } from '../logging/failure-log';

/**
 * Other modules that must hear of refusals (webhooks count premature lookups, which the log does
 * not record) add a listener here; it runs before the refusal is answered.
 */
export type RefusalListener = NonNullable<LedgerObserver['onRefused']>;
export const REFUSAL_LISTENERS = Symbol('REFUSAL_LISTENERS');
/**
 * Other modules that act on a step as soon as it changes (the work feed hands a step just planned
 * out before the read model shows it) add a listener here; it runs after the append, before the
 * answer.
 */
export type AppendListener = NonNullable<LedgerObserver['onAppended']>;
export const APPEND_LISTENERS = Symbol('APPEND_LISTENERS');
const refusalLogger = new Logger('LedgerService');

export interface LedgerModuleOptions {
  config: LedgerConfig;
  /** Tests pass a store or a clock of their own; production uses the configured ones. */
  store?: EventStore;
  clock?: Clock;
}

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

class StoreLifecycle implements OnApplicationBootstrap, OnApplicationShutdown {
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

/** For a log written before anchors: say so loudly, and file each stream as an append would have. */
function adoptionHooks() {
  const logger = new Logger('Integrity');
  return {
    onLogAdopted: (events: number) =>
      logger.warn(
        { events },
        'this log was written before anchors were kept: it is anchored as it stands now, and its past is trusted from here on',
      ),
    indexer: stepIndexer,
  };
}

/**
 * The production clock: ledger time on the base this boot's instances share in the store, its
 * agreement with other hosts' instances judged by heartbeats (docs/reliability.md, "Instances
 * agree on time"). A wall clock step is logged loudly and counted.
 */
async function instanceClocks(config: LedgerConfig, metrics: LedgerMetrics): Promise<InstanceClocks> {
  const logger = new Logger('LedgerClock');
  const store = await openTimeBaseStore(config);
  let storeFailing = false;
  const clocks = await InstanceClocks.start(store, {
    settings: loadClockSettings(),
    onStep: (step) =>
      logger.warn(
        { offset_ms: step.offset_ms },
        'the wall clock stepped, or differs from the time base the instances of this host share; decisions keep following elapsed (monotonic) time, so no window opens early or late',
      ),
    onAgreementChange: (judgement) => {
      if (judgement.takeOvers === 'allowed')
        logger.log(
          { skew_ms: judgement.skewMs },
          'the clocks of the instances agree: expired leases are handed over again',
        );
      else if (judgement.reason === 'skew')
        logger.error(
          { skew_ms: judgement.skewMs, ahead: judgement.ahead?.instance_id },
          'the clocks of two instances sharing this store differ by more than the bound: no expired lease of another holder is handed over until they agree (docs/reliability.md, "Instances agree on time")',
        );
    },
    onStoreError: (what, error) => {
      if (what === 'base')
        logger.error(
          { err: error },
          'the time base could not be read from the store: this instance keeps its own clock, judged against the others by heartbeats',
        );
      else if (!storeFailing) logger.warn({ err: error }, 'a clock heartbeat could not be written');
      storeFailing = what === 'heartbeat';
    },
  });
  metrics.watchClock(() => {
    const status = clocks.status();
    return {
      ...clocks.clock.status(),
      instance_skew_ms: status.skew_ms,
      take_overs_held: status.take_overs === 'held',
    };
  });
  return clocks;
}

class InstanceClocksLifecycle implements OnApplicationShutdown {
  constructor(@Inject(INSTANCE_CLOCKS) private readonly clocks: InstanceClocks | null) {}

  async onApplicationShutdown(): Promise<void> {
    await this.clocks?.stop();
  }
}

@Module({})
export class LedgerModule {
  static register(options: LedgerModuleOptions): DynamicModule {
    return {
      module: LedgerModule,
      global: true,
      providers: [
        { provide: CONFIG, useValue: options.config },
        // Optional: without the observability module (a module test) the hooks count nothing.
        {
          provide: LEDGER_METRICS,
          inject: [{ token: METRICS_REGISTRY, optional: true }],
          useFactory: (registry?: Registry) => createLedgerMetrics(registry),
        },
        // Null when a test injects its clock: there is then no shared time to agree on.
        {
          provide: INSTANCE_CLOCKS,
          inject: [LEDGER_METRICS],
          useFactory: (metrics: LedgerMetrics) => (options.clock ? null : instanceClocks(options.config, metrics)),
        },
        {
          provide: CLOCK,
          inject: [INSTANCE_CLOCKS],
          useFactory: (clocks: InstanceClocks | null) => options.clock ?? (clocks as InstanceClocks).clock,
        },
        options.store
          ? { provide: EVENT_STORE, useValue: options.store }
          : {
              provide: EVENT_STORE,
              inject: [LEDGER_METRICS],
              useFactory: (metrics: LedgerMetrics) =>
                openEventStore(options.config, { ...metrics.storeHooks, ...adoptionHooks() }),
            },
        { provide: REFUSAL_LISTENERS, useFactory: () => new Set<RefusalListener>() },
        { provide: APPEND_LISTENERS, useFactory: () => new Set<AppendListener>() },
        {
          provide: IntegrityMonitor,
          inject: [EVENT_STORE, CLOCK, CONFIG],
          useFactory: (store: EventStore, clock: Clock, config: LedgerConfig) =>
            new IntegrityMonitor(store, () => clock.now(), config.anchorKey),
        },
        {
          provide: LedgerService,
          inject: [
            EVENT_STORE,
            CLOCK,
            CONFIG,
            LEDGER_METRICS,
            IntegrityMonitor,
            REFUSAL_LISTENERS,
            APPEND_LISTENERS,
            INSTANCE_CLOCKS,
          ],
          useFactory: (
            store: EventStore,
            clock: Clock,
            config: LedgerConfig,
            metrics: LedgerMetrics,
            integrity: IntegrityMonitor,
            listeners: Set<RefusalListener>,
            appendListeners: Set<AppendListener>,
            clocks: InstanceClocks | null,
          ) =>
            new LedgerService(
              store,
              clock,
              {
                envelopeLimits: config.envelopeLimits,
                defaultPolicy: config.defaultPolicy,
                maxConflictRetries: config.maxConflictRetries,
                maxStreamEvents: config.maxStreamEvents,
              },
              {
                ...metrics.observer,
                onAppended: (events, tenant, step) => {
                  metrics.observer.onAppended?.(events, tenant);
                  for (const listener of appendListeners) {
                    // The events are stored: a listener's fault must not turn their answer into a 500.
                    try {
                      listener(events, tenant, step);
                    } catch (error) {
                      refusalLogger.error({ err: error }, 'an append listener failed');
                    }
                  }
                },
                onRefused: (code, where) => {
                  metrics.observer.onRefused?.(code, where);
                  for (const listener of listeners) {
                    // A listener's fault must not turn the caller's refusal into a 500.
                    try {
                      listener(code, where);
                    } catch (error) {
                      refusalLogger.error({ err: error, code }, 'a refusal listener failed');
                    }
                  }
                },
              },
              integrity,
              undefined,
              // Windows another instance may have started are judged against its clock (docs/reliability.md).
              clocks ?? undefined,
            ),
        },
        {
          provide: SubmitCommandHandler,
          inject: [LedgerService],
          useFactory: (ledger: LedgerService) => ledger.commands,
        },
        HistoryRollbackCheck,
        StoreLifecycle,
        InstanceClocksLifecycle,
      ],
      exports: [
        CONFIG,
        CLOCK,
        INSTANCE_CLOCKS,
        EVENT_STORE,
        LedgerService,
        SubmitCommandHandler,
        IntegrityMonitor,
        REFUSAL_LISTENERS,
        APPEND_LISTENERS,
      ],
    };
  }
}
