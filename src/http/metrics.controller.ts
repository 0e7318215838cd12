import { Controller, Get, Header, Inject } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiProduces, ApiTags } from '@nestjs/swagger';
import { Registry } from 'prom-client';
import { RequireAccess } from '../auth/access';
import { CallerParam, type Caller } from './caller';
import { expositionFor, METRICS_REGISTRY } from '../observability/metrics';

@ApiTags('observability')
@Controller()
export class MetricsController {
  constructor(@Inject(METRICS_REGISTRY) private readonly registry: Registry) {}

  @Get('metrics')
  @RequireAccess('metrics')
  @Header('content-type', Registry.PROMETHEUS_CONTENT_TYPE)
  @ApiOperation({
    summary:
      "Prometheus exposition: to a tenant's admin, that tenant's series only; to a metrics key, the whole process's.",
  })
  @ApiProduces(Registry.PROMETHEUS_CONTENT_TYPE)
  @ApiOkResponse({ description: 'Prometheus text format 0.0.4', schema: { type: 'string' } })
  metrics(@CallerParam() caller: Caller): Promise<string> {
    return expositionFor(this.registry, {
      tenant: caller.tenant,
      everyTenant: caller.role === 'metrics' || caller.local === true,
    });
  }
}
