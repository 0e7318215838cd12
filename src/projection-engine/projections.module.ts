import {
  Inject,
  Injectable,
  Logger,
  Module,
  Optional,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleDestroy,
} from '@nestjs/common';
import type { Registry } from 'prom-client';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { CLOCK, systemClock, type Clock } from '../shared/clock';
import { IntegrityMonitor } from '../integrity/integrity-monitor';
import { METRICS_REGISTRY } from '../observability/metrics';
import { ObservabilityModule } from '../observability/observability.module';
import { registerProjectionMetrics } from '../observability/projection-metrics';
import { EVENT_STORE, type EventStore } from '../store/event-store.port';
import { embeddedLogFile } from '../adapters/store.factory';
import { ProjectionEngine } from './projection-engine';
import type { ProjectionRunner } from './projection-runner';
import { WorkerProjectionRunner } from './projection-worker-client';
import { ProjectionQueries } from './projection-queries';
import { checkReadModelDigests } from './read-model-verification';
import { sealCovers, takeReadModelSeal, writeReadModelSeal, type SealVerdict } from './read-model-seal';
import { readModelFile, type ReadModel } from '../store/read-model.port';
import { openReadModel, openSharedReadModelStore } from '../adapters/store.factory';
import { SharedProjectionRunner } from './projector-election';
import { FailureLog } from '../logging/failure-log';

export const PROJECTION_ENGINE = Symbol('PROJECTION_ENGINE');
export const READ_MODEL = Symbol('READ_MODEL');
export const READ_MODEL_CHECK = Symbol('READ_MODEL_CHECK');
/** The read model's seal from the last clean stop, taken before the read model is opened. */
export const READ_MODEL_SEAL = Symbol('READ_MODEL_SEAL');

/** Where the start-up check of the read models stands (docs/reliability.md, "A corrupted read model"). */
export interface ReadModelCheck {
  state: 'not_checked' | 'verifying' | 'verified' | 'rebuilt' | 'failed';
  /** Projections found not to be what the log gives (each then rebuilt). */
  differences?: number;
  projections_rebuilt?: string[];
  error?: string;
  /**
   * How it was found whole: sealed at the last clean stop and untouched since, or each projection's
   * checkpoint and row digest compared with the log.
   */
  by?: 'seal' | 'digest';
  /** What the comparison by digest read: events of the log (one per projection at most), rows of the read model. */
  events_read?: number;
  rows_read?: number;
}

/**
 * Whether reads of a projection are served: not while the read models are compared with the log,
 * nor, once the ones that differ are known, while those are rebuilt beside (the others are served
 * meanwhile); not after a check that failed.
 */
export function servable(check: ReadModelCheck, projection: string): boolean {
  if (check.state === 'failed') return false;
  if (check.state !== 'verifying') return true;
  return check.projections_rebuilt !== undefined && !check.projections_rebuilt.includes(projection);
}

/**
 * Starts following the log once the application is up. Stops in onModuleDestroy, the first
 * shutdown phase, so the engine is idle before a store closed in a later phase goes away; the read
 * model closes last.
 */
@Injectable()
export class ProjectionsLifecycle implements OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown {
  private readonly logger = new Logger('ReadModels');
  private checking: Promise<void> | undefined;

  constructor(
    @Inject(PROJECTION_ENGINE) private readonly engine: ProjectionRunner,
    @Inject(READ_MODEL) private readonly readModel: ReadModel,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CONFIG) private readonly config: LedgerConfig,
    @Inject(READ_MODEL_CHECK) readonly readModelCheck: ReadModelCheck,
    @Inject(READ_MODEL_SEAL) private readonly seal: SealVerdict,
    @Optional() @Inject(IntegrityMonitor) private readonly integrity?: IntegrityMonitor,
  ) {}

  private set(check: ReadModelCheck): void {
    // One shared object: the queries read it to refuse serving a read model not yet checked.
    for (const key of Object.keys(this.readModelCheck) as Array<keyof ReadModelCheck>) delete this.readModelCheck[key];
    Object.assign(this.readModelCheck, check);
  }

  onApplicationBootstrap(): void {
    // The rollback check ran in onModuleInit (src/integrity/history-rollback.check.ts). On a rolled-back log a
    // read model ahead of it is the evidence: it is neither checked (that would rebuild it down to
    // the old log) nor followed. Accepted by the operator, every read model is rebuilt from the log.
    if (this.engine instanceof SharedProjectionRunner) {
      // The shared read models are neither compared with the log here nor sealed: this copy starts
      // empty and is read from what the projector published (docs/postgres.md, "Read models").
      this.engine.start();
      return;
    }
    const rollback = this.integrity?.current().rollback?.state;
    if (rollback === 'rolled_back') {
      this.logger.error(
        'the log was rolled back: the read models are kept as they stand, neither rebuilt nor followed',
      );
      return;
    }
    if (rollback === 'accepted') {
      this.checking = this.rebuildAll().then(() => this.engine.start());
      return;
    }
    // Not awaited: catching up a long log must not hold the server back; readers who need a
    // position ask for it with wait_for_position. The read models are checked against the log
    // first, and a damaged one is rebuilt instead of served.
    this.checking = (this.config.verifyOnStart ? this.checkReadModels() : Promise.resolve()).then(() =>
      this.engine.start(),
    );
  }

  /**
   * True when the read model is the one this service sealed at its last clean stop, untouched since,
   * with every projection this build runs at the same version and no further on than the log: it
   * is then served as it is, without a rebuild to compare it (docs/reliability.md, "A corrupted read
   * model").
   */
  private async sealed(): Promise<boolean> {
    if (!this.seal.holds) {
      if (this.seal.reason !== 'no_seal')
        this.logger.warn(
          { reason: this.seal.reason },
          'the read model is not the one sealed at the last stop: it is compared with the log before it is served',
        );
      return false;
    }
    return sealCovers(this.seal.seal, LEDGER_PROJECTIONS, await this.store.headPosition());
  }

  private async rebuildAll(): Promise<void> {
    const names = LEDGER_PROJECTIONS.map((projection) => projection.name);
    this.set({ state: 'verifying', projections_rebuilt: names });
    try {
      await this.engine.rebuild(names);
      this.set({ state: 'rebuilt', projections_rebuilt: names });
      this.logger.warn({ projections: names }, 'the read models were rebuilt from the accepted (older) log');
    } catch (error) {
      this.set({ state: 'failed', error: (error as Error).message });
      this.logger.error({ err: error }, 'the read models could not be rebuilt from the accepted log');
    }
  }

  private async checkReadModels(): Promise<void> {
    this.set({ state: 'verifying' });
    try {
      if (await this.sealed()) {
        this.set({ state: 'verified', differences: 0, by: 'seal' });
        return;
      }
      const report = await checkReadModelDigests(this.store, this.readModel, LEDGER_PROJECTIONS);
      const read = { by: 'digest' as const, events_read: report.eventsRead, rows_read: report.rowsRead };
      const damaged = report.projections.filter((projection) => projection.mismatch);
      if (damaged.length === 0) {
        this.set({ state: 'verified', differences: 0, ...read });
        return;
      }
      const names = damaged.map((projection) => projection.name);
      this.logger.error(
        { projections: Object.fromEntries(damaged.map((projection) => [projection.name, projection.mismatch])) },
        'a read model differs from what the log gives: it is rebuilt from the log instead of served',
      );
      this.set({ state: 'verifying', projections_rebuilt: names, ...read });
      await this.engine.rebuild(names);
      this.set({ state: 'rebuilt', differences: names.length, projections_rebuilt: names, ...read });
    } catch (error) {
      this.set({ state: 'failed', error: (error as Error).message });
      this.logger.error({ err: error }, 'the read models could not be checked against the log');
    }
  }

  async onModuleDestroy(): Promise<void> {
    await this.checking?.catch(() => undefined);
    await this.engine.stop();
  }

  onApplicationShutdown(): void {
    // Sealed only after a clean run: checked or sealed at start, the engine stopped with its work committed.
    const state = this.readModelCheck.state;
    const sealable =
      this.config.verifyOnStart &&
      this.engine.status().state !== 'failed' &&
      (state === 'verified' || state === 'rebuilt');
    const checkpoints = sealable ? this.readModel.checkpoints() : [];
    this.readModel.close();
    if (!sealable) return;
    try {
      writeReadModelSeal(
        readModelFile(this.config.dataDir),
        checkpoints,
        this.config.anchorKey,
        new Date().toISOString(),
      );
    } catch (error) {
      this.logger.warn({ err: error }, 'the read model could not be sealed: the next start compares it with the log');
    }
  }
}

/**
 * The projection engine, its read model and the queries over it (docs/contract.md §5, §9). Needs EVENT_STORE
 * and CONFIG from the application; CLOCK is optional (the system clock otherwise).
 */
@Module({
  imports: [ObservabilityModule],
  providers: [
    {
      provide: READ_MODEL_SEAL,
      inject: [CONFIG],
      useFactory: (config: LedgerConfig): SealVerdict =>
        takeReadModelSeal(readModelFile(config.dataDir), config.anchorKey),
    },
    {
      provide: READ_MODEL,
      // After the seal is taken: opening the read model for writing may touch its files.
      inject: [CONFIG, READ_MODEL_SEAL],
      useFactory: (config: LedgerConfig) =>
        // On PostgreSQL this instance's copy of the shared read models, read afresh at each start.
        openReadModel({
          file: config.store === 'postgres' ? ':memory:' : readModelFile(config.dataDir),
          digestKey: config.anchorKey,
        }),
    },
    {
      provide: PROJECTION_ENGINE,
      inject: [EVENT_STORE, READ_MODEL, CONFIG],
      useFactory: async (store: EventStore, readModel: ReadModel, config: LedgerConfig): Promise<ProjectionRunner> => {
        const logger = new Logger('ProjectionEngine');
        // It follows the log again every second: a store that is down must not write a stack each time.
        const failures = new FailureLog(logger);
        const onError = (error: Error) =>
          failures.failed(error, 'projection engine failed; following the log again shortly');
        const shared = await openSharedReadModelStore(config);
        if (shared) {
          return new SharedProjectionRunner({
            store,
            shared,
            readModel,
            projections: LEDGER_PROJECTIONS,
            onError,
            onRole: (role) =>
              logger.log(
                { role },
                role === 'projector'
                  ? 'elected to project the shared read models'
                  : 'copying the shared read models from the projector',
              ),
          });
        }
        const eventsFile = embeddedLogFile(store);
        if (eventsFile !== undefined && config.projectionsThread === 'worker') {
          return new WorkerProjectionRunner({
            eventsFile,
            readModelFile: readModelFile(config.dataDir),
            digestKey: config.anchorKey,
            busyTimeoutMs: config.sqliteBusyTimeoutMs,
            store,
            readModel,
            projections: LEDGER_PROJECTIONS,
            onError,
            onWorkerExit: (error, restarts) =>
              logger.error(
                { err: error, restarts },
                'the projection worker thread ended; starting it again from the stored checkpoints',
              ),
          });
        }
        return new ProjectionEngine({ store, readModel, projections: LEDGER_PROJECTIONS, onError });
      },
    },
    { provide: READ_MODEL_CHECK, useFactory: (): ReadModelCheck => ({ state: 'not_checked' }) },
    {
      provide: ProjectionQueries,
      inject: [PROJECTION_ENGINE, READ_MODEL, EVENT_STORE, READ_MODEL_CHECK, { token: CLOCK, optional: true }],
      useFactory: (
        engine: ProjectionRunner,
        readModel: ReadModel,
        store: EventStore,
        check: ReadModelCheck,
        clock?: Clock,
      ) =>
        new ProjectionQueries(engine, readModel, clock ?? systemClock, undefined, {
          store,
          servable: (projection) => servable(check, projection),
        }),
    },
    {
      provide: 'PROJECTION_METRICS',
      inject: [METRICS_REGISTRY, PROJECTION_ENGINE, ProjectionQueries],
      useFactory: (registry: Registry, engine: ProjectionRunner, queries: ProjectionQueries) =>
        registerProjectionMetrics(registry, {
          lag: () => engine.lag(),
          status: () => engine.status(),
          trustDocs: (tenant) => queries.trustDocs(tenant),
          ...(engine.onReadable ? { onReadable: (listener) => engine.onReadable?.(listener) } : {}),
        }),
    },
    ProjectionsLifecycle,
  ],
  exports: [PROJECTION_ENGINE, READ_MODEL, ProjectionQueries, ProjectionsLifecycle],
})
export class ProjectionsModule {}
