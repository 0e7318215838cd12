import { Module, type DynamicModule } from '@nestjs/common';
import { APP_FILTER, APP_GUARD } from '@nestjs/core';
import { ThrottlerModule } from '@nestjs/throttler';
import { parseApiKeys, type ApiKeyEntry } from './auth/api-keys';
import { API_KEYS, AuthGuard } from './auth/auth.guard';
import { LedgerModule, type LedgerModuleOptions } from './ledger/ledger.module';
import { OperationsController } from './http/operations.controller';
import { OperationsQueries } from './http/operations.queries';
import { ProblemFilter } from './http/problem.filter';
import { SchemaController } from './http/schema.controller';
import { AdminController } from './http/security/admin.controller';
import { RateLimitGuard, rateLimitOptions } from './http/security/rate-limit.guard';
import { HealthModule } from './health/health.module';
import { LoggingModule } from './logging/logging.module';
import { ObservabilityModule } from './observability/observability.module';
import { ProjectionsModule } from './projection-engine/projections.module';
import { OpenApiModule } from './openapi/openapi.module';
import { UiModule } from './ui/ui.module';
import { WebhooksModule } from './webhooks/webhooks.module';
import { WorkModule } from './work/work.module';

export interface AppOptions extends LedgerModuleOptions {
  apiKeys?: ApiKeyEntry[];
}

@Module({})
export class AppModule {
  static register(options: AppOptions): DynamicModule {
    return {
      module: AppModule,
      imports: [
        LedgerModule.register(options),
        LoggingModule.register(options.config.logLevel),
        ObservabilityModule,
        ProjectionsModule,
        WorkModule,
        HealthModule.register(),
        OpenApiModule,
        UiModule,
        WebhooksModule,
        ThrottlerModule.forRoot(rateLimitOptions(options.config.rateLimitPerMinute)),
      ],
      controllers: [OperationsController, SchemaController, AdminController],
      providers: [
        OperationsQueries,
        { provide: API_KEYS, useValue: options.apiKeys ?? parseApiKeys(options.config.apiKeys) },
        // In this order: the rate limit counts refused keys too (see RateLimitGuard).
        { provide: APP_GUARD, useClass: RateLimitGuard },
        { provide: APP_GUARD, useClass: AuthGuard },
        { provide: APP_FILTER, useClass: ProblemFilter },
      ],
    };
  }
}
