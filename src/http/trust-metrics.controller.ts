import { Controller, Get, Inject, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { RequireAccess } from '../auth/access';
import { ProjectionQueries } from '../projection-engine/projection-queries';
import { CallerParam, type Caller } from './caller';
import { trustQuery, type QueryParams } from './read-queries';
import { TrustMetricsDto } from './dto/trust-metrics.dto';

@ApiTags('metrics')
@Controller('v1/metrics')
export class TrustMetricsController {
  constructor(@Inject(ProjectionQueries) private readonly queries: ProjectionQueries) {}

  @Get('trust')
  @RequireAccess('read')
  @ApiOperation({
    summary:
      'Trust metrics, overall and per tool: unknown outcomes and their resolution, duplicates prevented, recovery time, escalations.',
  })
  @ApiQuery({ name: 'tool', required: false, type: String })
  @ApiQuery({ name: 'limit', required: false, type: Number })
  @ApiQuery({ name: 'cursor', required: false, type: String })
  @ApiQuery({ name: 'wait_for_position', required: false, type: Number })
  @ApiQuery({ name: 'wait_timeout_ms', required: false, type: Number })
  @ApiOkResponse({ type: TrustMetricsDto })
  trust(@CallerParam() caller: Caller, @Query() query: QueryParams) {
    return this.queries.trust(caller, trustQuery(query, this.queries.settings.maxWaitMs));
  }
}
