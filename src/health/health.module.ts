import { Module, type DynamicModule } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { HEALTH_SETTINGS, loadHealthSettings } from './health-settings';
import { LedgerHealthIndicators } from './ledger-health.indicators';
import { Readiness } from './readiness';

/** The readiness checks behind /health (@nestjs/terminus). Needs EVENT_STORE from the ledger module. */
@Module({})
export class HealthModule {
  static register(env: NodeJS.ProcessEnv = process.env): DynamicModule {
    return {
      module: HealthModule,
      // Readiness changes are logged by Readiness; terminus would log every failed probe.
      imports: [TerminusModule.forRoot({ logger: false })],
      providers: [{ provide: HEALTH_SETTINGS, useValue: loadHealthSettings(env) }, LedgerHealthIndicators, Readiness],
      exports: [TerminusModule, LedgerHealthIndicators, Readiness],
    };
  }
}
