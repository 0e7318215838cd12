import { Controller, Get, Inject, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiProperty, ApiPropertyOptional, ApiQuery, ApiTags } from '@nestjs/swagger';
import { RequireAccess } from '../auth/access';
import { ProjectionQueries } from '../projection-engine/projection-queries';
import { CallerParam, type Caller } from './caller';
import { recoveryQuery, type QueryParams } from './read-queries';

export class RecoveryItemDto {
  @ApiProperty() operation_ref!: string;
  @ApiProperty() tool!: string;
  @ApiProperty() run_id!: string;
  @ApiProperty({ enum: ['dispatched', 'verifying'] }) status!: string;
  @ApiProperty({ format: 'date-time', description: 'When the step entered this status (ledger clock).' })
  since!: string;
  @ApiProperty({ description: 'The attempt in flight or to verify.' }) attempt!: number;
  @ApiProperty() attempts_used!: number;
  @ApiProperty({ enum: ['read', 'write'] }) side_effect!: string;
  @ApiProperty() reason!: string;
  @ApiPropertyOptional({ description: "From the step's policy: the lookup to verify with." })
  verification_tool?: string;
  @ApiProperty() revision!: number;
}

export class RecoveryListDto {
  @ApiProperty({ type: [RecoveryItemDto] }) items!: RecoveryItemDto[];
  @ApiPropertyOptional() next_cursor?: string;
  @ApiProperty() as_of_position!: number;
}

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
