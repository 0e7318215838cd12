import { Controller, Get, Inject, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { RequireAccess } from '../auth/access';
import { STEP_STATUSES } from '@recovery-ledger/core';
import { TRUST_FLAGS } from '@recovery-ledger/projections';
import { ProjectionQueries } from '../projection-engine/projection-queries';
import { CallerParam, type Caller } from './caller';
import { operationListQuery, type QueryParams } from './read-queries';
import { RecoveryListDto } from './dto/recovery.dto';

@ApiTags('operations')
@Controller('v1/operations')
export class OperationListController {
  constructor(@Inject(ProjectionQueries) private readonly queries: ProjectionQueries) {}

  @Get()
  @RequireAccess('read')
  @ApiOperation({
    summary:
      'Every operation of the tenant (projection), oldest in its status first (or newest); by state, tool, run, age and text on the ref.',
  })
  @ApiQuery({ name: 'status', required: false, enum: STEP_STATUSES })
  @ApiQuery({ name: 'tool', required: false, type: String })
  @ApiQuery({ name: 'run_id', required: false, type: String })
  @ApiQuery({
    name: 'older_than_ms',
    required: false,
    type: Number,
    description: 'Only steps in their status at least this long (ledger clock).',
  })
  @ApiQuery({
    name: 'q',
    required: false,
    type: String,
    description: 'Text the operation_ref contains (case-insensitive).',
  })
  @ApiQuery({
    name: 'has',
    required: false,
    enum: TRUST_FLAGS,
    description: 'Only operations counted by this trust metric.',
  })
  @ApiQuery({
    name: 'order',
    required: false,
    enum: ['oldest', 'newest'],
    description: 'By time in status; oldest first by default.',
  })
  @ApiQuery({ name: 'limit', required: false, type: Number })
  @ApiQuery({ name: 'cursor', required: false, type: String })
  @ApiQuery({ name: 'wait_for_position', required: false, type: Number })
  @ApiQuery({ name: 'wait_timeout_ms', required: false, type: Number })
  @ApiOkResponse({ type: RecoveryListDto })
  list(@CallerParam() caller: Caller, @Query() query: QueryParams) {
    return this.queries.operations(caller, operationListQuery(query, this.queries.settings.maxWaitMs));
  }
}
