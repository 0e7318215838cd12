import { Module, type DynamicModule } from '@nestjs/common';
import { HealthModule } from '../health/health.module';
import { OpenApiModule } from '../openapi/openapi.module';
import { ProjectionsModule } from '../projection-engine/projections.module';
import { WebhooksModule } from '../webhooks/webhooks.module';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { WorkModule } from '../work/work.module';
import { DocsController } from './docs.controller';
import { EvidenceController } from './evidence.controller';
import { HealthController } from './health.controller';
import { IdempotencyKeys } from './idempotency-keys';
import { openSharedIdempotencyKeyStore } from '../adapters/store.factory';
import { MetricsController } from './metrics.controller';
import { OperationListController } from './operation-list.controller';
import { OperationsController } from './operations.controller';
import { OperationsQueries } from './operations.queries';
import { OperatorFactsController } from './operator-facts.controller';
import { OperatorFactsService } from './operator-facts.service';
import { SubmitCommandResolver } from './submit-command.resolver';
import { RecoveryController } from './recovery.controller';
import { RunsController } from './runs.controller';
import { SchemaController } from './schema.controller';
import { AdminController } from './security/admin.controller';
import { AdminService } from './security/admin.service';
import { longPollLimiterProvider, LongPollInterceptor } from './security/long-poll-limit';
import { TriageController } from './triage.controller';
import { TrustMetricsController } from './trust-metrics.controller';
import { UiController } from './ui.controller';
import { WhoAmIController } from './whoami.controller';
import { WebhooksController } from './webhooks.controller';
import { WorkController } from './work.controller';

/**
 * The HTTP edge: every route of the service, declared here and nowhere else. The modules below it
 * provide the services the controllers call and declare no route, so a layer's wiring never reaches
 * up into this one (docs/architecture.md). The ledger, its store and the metrics registry are global.
 */
@Module({})
export class HttpModule {
  static register(): DynamicModule {
    return {
      module: HttpModule,
      imports: [ProjectionsModule, WorkModule, HealthModule.register(), OpenApiModule, WebhooksModule],
      // In the order the routes were registered before they were gathered here, so the generated
      // OpenAPI document keeps its order.
      controllers: [
        OperationsController,
        SchemaController,
        AdminController,
        MetricsController,
        EvidenceController,
        RunsController,
        RecoveryController,
        TrustMetricsController,
        OperationListController,
        TriageController,
        WorkController,
        HealthController,
        DocsController,
        UiController,
        WebhooksController,
        WhoAmIController,
        OperatorFactsController,
      ],
      providers: [
        OperationsQueries,
        SubmitCommandResolver,
        OperatorFactsService,
        AdminService,
        longPollLimiterProvider,
        LongPollInterceptor,
        {
          provide: IdempotencyKeys,
          inject: [CONFIG],
          useFactory: async (config: LedgerConfig) =>
            new IdempotencyKeys((await openSharedIdempotencyKeyStore(config)) ?? config.dataDir),
        },
      ],
    };
  }
}
