import { Controller, Get, Header, Inject } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiProduces, ApiTags } from '@nestjs/swagger';
import { Registry } from 'prom-client';
import { RequireAccess } from '../auth/access';
import { CallerParam, type Caller } from '../http/caller';
import { METRICS_REGISTRY, tenantExposition } from './metrics';

@ApiTags('observability')
@Controller()
export class MetricsController {
  constructor(@Inject(METRICS_REGISTRY) private readonly registry: Registry) {}

  @Get('metrics')
  @RequireAccess('read')
  @Header('content-type', Registry.PROMETHEUS_CONTENT_TYPE)
  @ApiOperation({ summary: "Prometheus exposition: process metrics, projection lag, the caller's tenant's trust metrics." })
  @ApiProduces(Registry.PROMETHEUS_CONTENT_TYPE)
  @ApiOkResponse({ description: 'Prometheus text format 0.0.4', schema: { type: 'string' } })
  metrics(@CallerParam() caller: Caller): Promise<string> {
    return tenantExposition(this.registry, caller.tenant);
  }
}
