import { Inject, Injectable, Logger, ServiceUnavailableException } from '@nestjs/common';
import { HealthCheckService, type HealthCheckResult } from '@nestjs/terminus';
import { LedgerHealthIndicators } from './ledger-health.indicators';

/** What /health/ready answers: Terminus's report, with 503 when a check is down (docs/contract.md §5). */
export interface ReadinessAnswer {
  status: 200 | 503;
  report: HealthCheckResult;
}

/** Runs the readiness checks, and logs when readiness changes rather than on every probe. */
@Injectable()
export class Readiness {
  private readonly logger = new Logger('Readiness');
  private lastReady: boolean | undefined;

  constructor(
    @Inject(HealthCheckService) private readonly health: HealthCheckService,
    @Inject(LedgerHealthIndicators) private readonly indicators: LedgerHealthIndicators,
  ) {}

  async check(): Promise<ReadinessAnswer> {
    try {
      const report = await this.health.check([
        () => this.indicators.storeReachable(),
        () => this.indicators.projectionsFresh(),
        () => this.indicators.historyIntact(),
        () => this.indicators.clockSteps(),
      ]);
      this.note(true, report);
      return { status: 200, report };
    } catch (error) {
      // Terminus answers a failed check with a 503 whose body is the same report; it is answered as
      // such, before the problem+json filter would turn it into a STORE_UNAVAILABLE problem.
      if (!(error instanceof ServiceUnavailableException)) throw error;
      const report = error.getResponse() as HealthCheckResult;
      this.note(false, report);
      return { status: 503, report };
    }
  }

  private note(ready: boolean, report: HealthCheckResult): void {
    if (this.lastReady === ready) return;
    this.lastReady = ready;
    if (ready) this.logger.log({ health: report.details }, 'ready');
    else this.logger.warn({ health: report.details, causes: this.indicators.failureCauses() }, 'not ready');
  }
}
