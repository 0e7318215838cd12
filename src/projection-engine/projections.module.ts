import { OperationListController } from '../http/operation-list.controller';
import {
  Inject,
  Injectable,
  Logger,
  Module,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleDestroy,
} from '@nestjs/common';
import type { Registry } from 'prom-client';
import { LEDGER_PROJECTIONS } from '../../projections/projection-catalog';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { EvidenceController } from '../http/evidence.controller';
import { RecoveryController } from '../http/recovery.controller';
import { RunsController } from '../http/runs.controller';
import { TriageController } from '../http/triage.controller';
import { TrustMetricsController } from '../http/trust-metrics.controller';
import { CLOCK, systemClock, type Clock } from '../ledger/clock';
import { METRICS_REGISTRY } from '../observability/metrics';
import { ObservabilityModule } from '../observability/observability.module';
import { registerProjectionMetrics } from '../observability/projection-metrics';
import { EVENT_STORE, type EventStore } from '../store/event-store.port';
import { ProjectionEngine } from './projection-engine';
import { ProjectionQueries } from './projection-queries';
import { readModelFile, SqliteReadModel } from './sqlite-read-model.store';

export const PROJECTION_ENGINE = Symbol('PROJECTION_ENGINE');
export const READ_MODEL = Symbol('READ_MODEL');

/**
 * Starts following the log once the application is up. Stops in onModuleDestroy, the first
 * shutdown phase, so the engine is idle before a store closed in a later phase goes away; the read
 * model closes last.
 */
@Injectable()
export class ProjectionsLifecycle implements OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown {
  constructor(
    @Inject(PROJECTION_ENGINE) private readonly engine: ProjectionEngine,
    @Inject(READ_MODEL) private readonly readModel: SqliteReadModel,
  ) {}

  onApplicationBootstrap(): void {
    // Not awaited: catching up a long log must not hold the server back; readers who need a
    // position ask for it with wait_for_position.
    this.engine.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.engine.stop();
  }

  onApplicationShutdown(): void {
    this.readModel.close();
  }
}

/**
 * The projection engine, its read model and the read endpoints (SPEC §5, §9). Needs EVENT_STORE
 * and CONFIG from the application; CLOCK is optional (the system clock otherwise).
 */
@Module({
  imports: [ObservabilityModule],
  controllers: [EvidenceController, RunsController, RecoveryController, TrustMetricsController, OperationListController, TriageController],
  providers: [
    {
      provide: READ_MODEL,
      inject: [CONFIG],
      useFactory: (config: LedgerConfig) => SqliteReadModel.open({ file: readModelFile(config.dataDir) }),
    },
    {
      provide: PROJECTION_ENGINE,
      inject: [EVENT_STORE, READ_MODEL],
      useFactory: (store: EventStore, readModel: SqliteReadModel) => {
        const logger = new Logger('ProjectionEngine');
        return new ProjectionEngine({
          store,
          readModel,
          projections: LEDGER_PROJECTIONS,
          onError: (error) => logger.error({ err: error }, 'projection engine failed; following the log again shortly'),
        });
      },
    },
    {
      provide: ProjectionQueries,
      inject: [PROJECTION_ENGINE, READ_MODEL, { token: CLOCK, optional: true }],
      useFactory: (engine: ProjectionEngine, readModel: SqliteReadModel, clock?: Clock) =>
        new ProjectionQueries(engine, readModel, clock ?? systemClock),
    },
    {
      provide: 'PROJECTION_METRICS',
      inject: [METRICS_REGISTRY, PROJECTION_ENGINE, ProjectionQueries],
      useFactory: (registry: Registry, engine: ProjectionEngine, queries: ProjectionQueries) =>
        registerProjectionMetrics(registry, {
          lag: () => engine.lag(),
          status: () => engine.status(),
          trustDocs: (tenant) => queries.trustDocs(tenant),
        }),
    },
    ProjectionsLifecycle,
  ],
  exports: [PROJECTION_ENGINE, READ_MODEL, ProjectionQueries],
})
export class ProjectionsModule {}
