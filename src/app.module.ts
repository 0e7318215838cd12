import { Module, type DynamicModule } from '@nestjs/common';
import { APP_FILTER, APP_GUARD } from '@nestjs/core';
import { ThrottlerModule } from '@nestjs/throttler';
import { parseApiKeys, type ApiKeyEntry } from './auth/api-keys';
import { API_KEYS, AuthGuard } from './auth/auth.guard';
import { LedgerModule, type LedgerModuleOptions } from './ledger/ledger.module';
import { HttpModule } from './http/http.module';
import { ProblemFilter } from './http/problem.filter';
import { RateLimitGuard, rateLimitOptions } from './http/security/rate-limit.guard';
import { LoggingModule } from './logging/logging.module';
import { ObservabilityModule } from './observability/observability.module';
import type { DestinationStream } from 'pino';

export interface AppOptions extends LedgerModuleOptions {
  apiKeys?: ApiKeyEntry[];
  /** Where the log records go (default: stdout, as logDestination decides). */
  logDestination?: DestinationStream;
}

@Module({})
export class AppModule {
  static register(options: AppOptions): DynamicModule {
    return {
      module: AppModule,
      imports: [
        LedgerModule.register(options),
        LoggingModule.register(options.config.logLevel, options.logDestination),
        ObservabilityModule,
        HttpModule.register(),
        ThrottlerModule.forRoot(rateLimitOptions(options.config.rateLimitPerMinute)),
      ],
      providers: [
        { provide: API_KEYS, useValue: options.apiKeys ?? parseApiKeys(options.config.apiKeys) },
        // In this order: the rate limit counts refused keys too (see RateLimitGuard).
        { provide: APP_GUARD, useClass: RateLimitGuard },
        { provide: APP_GUARD, useClass: AuthGuard },
        { provide: APP_FILTER, useClass: ProblemFilter },
      ],
    };
  }
}
