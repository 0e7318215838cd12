import { Controller, Get, Inject, Param, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiParam, ApiQuery, ApiTags } from '@nestjs/swagger';
import { RequireAccess } from '../auth/access';
import { STEP_STATUSES } from '@recovery-ledger/core';
import { ProjectionQueries } from '../projection-engine/projection-queries';
import { CallerParam, type Caller } from './caller';
import { runListQuery, runQuery, type QueryParams } from './read-queries';
import { RunSummaryDto, RunListDto } from './dto/runs.dto';

@ApiTags('runs')
@Controller('v1/runs')
export class RunsController {
  constructor(@Inject(ProjectionQueries) private readonly queries: ProjectionQueries) {}

  @Get()
  @RequireAccess('read')
  @ApiOperation({ summary: "The tenant's runs, most recently changed first." })
  @ApiQuery({ name: 'q', required: false, type: String, description: 'Text the run id contains (case-insensitive).' })
  @ApiQuery({
    name: 'open',
    required: false,
    enum: ['true', 'false'],
    description: 'true: only runs with a step neither succeeded nor escalated.',
  })
  @ApiQuery({ name: 'limit', required: false, type: Number })
  @ApiQuery({ name: 'cursor', required: false, type: String })
  @ApiQuery({ name: 'wait_for_position', required: false, type: Number })
  @ApiQuery({ name: 'wait_timeout_ms', required: false, type: Number })
  @ApiOkResponse({ type: RunListDto })
  list(@CallerParam() caller: Caller, @Query() query: QueryParams) {
    return this.queries.runs(caller, runListQuery(query, this.queries.settings.maxWaitMs));
  }

  @Get(':run_id')
  @RequireAccess('read')
  @ApiOperation({ summary: 'The run summary: its steps, in the order they were planned, and where each stands.' })
  @ApiParam({ name: 'run_id', description: 'Percent-encoded as one path segment.' })
  @ApiQuery({ name: 'status', required: false, enum: STEP_STATUSES })
  @ApiQuery({ name: 'tool', required: false, type: String })
  @ApiQuery({ name: 'limit', required: false, type: Number })
  @ApiQuery({ name: 'cursor', required: false, type: String })
  @ApiQuery({ name: 'wait_for_position', required: false, type: Number })
  @ApiQuery({ name: 'wait_timeout_ms', required: false, type: Number })
  @ApiOkResponse({ type: RunSummaryDto })
  run(@CallerParam() caller: Caller, @Param('run_id') runId: string, @Query() query: QueryParams) {
    return this.queries.run(caller, runQuery(runId, query, this.queries.settings.maxWaitMs));
  }
}
