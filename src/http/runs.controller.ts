import { Controller, Get, Inject, Param, Query } from '@nestjs/common';
import {
  ApiOkResponse,
  ApiOperation,
  ApiParam,
  ApiProperty,
  ApiPropertyOptional,
  ApiQuery,
  ApiTags,
} from '@nestjs/swagger';
import { RequireAccess } from '../auth/access';
import { STEP_STATUSES } from '@recovery-ledger/core/domain/events';
import { ProjectionQueries } from '../projection-engine/projection-queries';
import { CallerParam, type Caller } from './caller';
import { runListQuery, runQuery, type QueryParams } from './read-queries';

export class RunStepDto {
  @ApiProperty() operation_ref!: string;
  @ApiProperty() tool!: string;
  @ApiProperty({ enum: ['read', 'write'] }) side_effect!: string;
  @ApiProperty({ enum: STEP_STATUSES }) status!: string;
  @ApiProperty({ format: 'date-time' }) since!: string;
  @ApiProperty() reason!: string;
  @ApiProperty() attempts_used!: number;
  @ApiProperty() current_attempt!: number;
  @ApiProperty({ format: 'date-time' }) planned_at!: string;
  @ApiProperty() planned_position!: number;
  @ApiProperty() revision!: number;
}

export class RunSummaryDto {
  @ApiProperty() run_id!: string;
  @ApiProperty() total!: number;
  @ApiProperty({ description: 'Steps neither succeeded nor escalated.' }) open!: number;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'integer' }, description: 'Steps per status.' })
  counts!: Record<string, number>;
  @ApiProperty({ format: 'date-time' }) started_at!: string;
  @ApiProperty({ format: 'date-time' }) updated_at!: string;
  @ApiProperty({ type: [RunStepDto] }) steps!: RunStepDto[];
  @ApiPropertyOptional() next_cursor?: string;
  @ApiProperty() as_of_position!: number;
}

export class RunListItemDto {
  @ApiProperty() run_id!: string;
  @ApiProperty() total!: number;
  @ApiProperty() open!: number;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'integer' } }) counts!: Record<string, number>;
  @ApiProperty({ format: 'date-time' }) started_at!: string;
  @ApiProperty({ format: 'date-time' }) updated_at!: string;
}

export class RunListDto {
  @ApiProperty({ type: [RunListItemDto] }) runs!: RunListItemDto[];
  @ApiPropertyOptional() next_cursor?: string;
  @ApiProperty() as_of_position!: number;
}

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
