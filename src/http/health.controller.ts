import { Controller, Get, Inject, Res } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, type HealthCheckResult } from '@nestjs/terminus';
import type { FastifyReply } from 'fastify';
import { RequireAccess } from '../auth/access';
import { Readiness } from '../health/readiness';

/**
 * Liveness says only that the process answers (a store outage must not make an orchestrator
 * restart a healthy process in a loop); readiness says it can do its job now. Both are public:
 * probes carry no key, and neither answer names a tenant or an operation.
 */
@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(
    @Inject(HealthCheckService) private readonly health: HealthCheckService,
    @Inject(Readiness) private readonly readiness: Readiness,
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
    const { status, report } = await this.readiness.check();
    reply.status(status);
    return report;
  }
}
