import { Controller, Get, Inject, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { RequireAccess } from '../auth/access';
import { ProjectionQueries } from '../projection-engine/projection-queries';
import { CallerParam, type Caller } from './caller';
import { recoveryQuery, type QueryParams } from './read-queries';
import { RecoveryListDto } from './dto/recovery.dto';

@ApiTags('recovery')
@Controller('v1/recovery')
export class RecoveryController {
  constructor(@Inject(ProjectionQueries) private readonly queries: ProjectionQueries) {}

  @Get()
  @RequireAccess('read')
  @ApiOperation({
    summary:
      'Operations dispatched or verifying, oldest first: what a restarted worker verifies by the same operation_ref.',
  })
  @ApiQuery({
    name: 'older_than_ms',
    required: false,
    type: Number,
    description: 'Only steps in their status at least this long (ledger clock).',
  })
  @ApiQuery({ name: 'tool', required: false, type: String })
  @ApiQuery({ name: 'status', required: false, enum: ['dispatched', 'verifying'] })
  @ApiQuery({ name: 'limit', required: false, type: Number })
  @ApiQuery({ name: 'cursor', required: false, type: String })
  @ApiQuery({ name: 'wait_for_position', required: false, type: Number })
  @ApiQuery({ name: 'wait_timeout_ms', required: false, type: Number })
  @ApiOkResponse({ type: RecoveryListDto })
  recovery(@CallerParam() caller: Caller, @Query() query: QueryParams) {
    return this.queries.recovery(caller, recoveryQuery(query, this.queries.settings.maxWaitMs));
  }
}
