import { Controller, Get, Inject, Logger, Res, ServiceUnavailableException } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, type HealthCheckResult } from '@nestjs/terminus';
import type { FastifyReply } from 'fastify';
import { RequireAccess } from '../auth/access';
import { LedgerHealthIndicators } from '../health/ledger-health.indicators';

/**
 * Liveness says only that the process answers (a store outage must not make an orchestrator
 * restart a healthy process in a loop); readiness says it can do its job now. Both are public:
 * probes carry no key, and neither answer names a tenant or an operation.
 */
@ApiTags('health')
@Controller('health')
export class HealthController {
  private readonly logger = new Logger('Readiness');
  private lastReady: boolean | undefined;

  constructor(
    @Inject(HealthCheckService) private readonly health: HealthCheckService,
    @Inject(LedgerHealthIndicators) private readonly indicators: LedgerHealthIndicators,
  ) {}

  @Get('live')
  @RequireAccess('public')
  @HealthCheck()
  @ApiOperation({
    summary: 'Liveness: the process is up and answering.',
    description:
      'Does not touch the store: an outage of the store must not make an orchestrator restart a healthy process.',
  })
  live(): Promise<HealthCheckResult> {
    return this.health.check([]);
  }

  @Get('ready')
  @RequireAccess('public')
  @HealthCheck()
  @ApiOperation({
    summary:
      'Readiness: the store is reachable, the projections are within the configured lag and verified, and the log has not failed verification (503 otherwise); wall clock steps are shown.',
    description:
      'LEDGER_READY_MAX_LAG_MS sets the lag allowed, LEDGER_HEALTH_TIMEOUT_MS how long the store check waits.',
  })
  async ready(@Res({ passthrough: true }) reply: FastifyReply): Promise<HealthCheckResult> {
    try {
      const result = await this.health.check([
        () => this.indicators.storeReachable(),
        () => this.indicators.projectionsFresh(),
        () => this.indicators.historyIntact(),
        () => this.indicators.clockSteps(),
      ]);
      this.note(true, result);
      return result;
    } catch (error) {
      // Terminus answers a failed check with a 503 whose body is the same report; it is answered
      // here, before the problem+json filter would turn it into a STORE_UNAVAILABLE problem.
      if (!(error instanceof ServiceUnavailableException)) throw error;
      const result = error.getResponse() as HealthCheckResult;
      this.note(false, result);
      reply.status(503);
      return result;
    }
  }

  /** Logs when readiness changes, not on every probe. */
  private note(ready: boolean, result: HealthCheckResult): void {
    if (this.lastReady === ready) return;
    this.lastReady = ready;
    if (ready) this.logger.log({ health: result.details }, 'ready');
    else this.logger.warn({ health: result.details, causes: this.indicators.failureCauses() }, 'not ready');
  }
}
