import { Controller, Get, Inject, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiProperty, ApiPropertyOptional, ApiQuery, ApiTags } from '@nestjs/swagger';
import { DEFAULT_TRIAGE_THRESHOLDS, TRIAGE_KINDS } from '@recovery-ledger/projections';
import { RequireAccess } from '../auth/access';
import { LongPoll } from './security/long-poll-limit';
import { ProjectionQueries } from '../projection-engine/projection-queries';
import { WorkFeed } from '../work/work-feed';
import { CallerParam, type Caller } from './caller';
import { changesQuery, triageQuery, type QueryParams } from './read-queries';

export class TriageItemDto {
  @ApiProperty({ enum: TRIAGE_KINDS, description: 'Why the step needs a person.' }) kind!: string;
  @ApiProperty() operation_ref!: string;
  @ApiProperty() run_id!: string;
  @ApiProperty() tool!: string;
  @ApiProperty({
    enum: ['escalated', 'awaiting_approval', 'verifying', 'dispatched', 'retry_scheduled', 'needs_input'],
  })
  status!: string;
  @ApiProperty({ description: 'Reason code of the transition that put the step in its status.' }) reason!: string;
  @ApiProperty({ format: 'date-time' }) since!: string;
  @ApiProperty({ description: 'Time in its status at as_of (ledger clock).' }) age_ms!: number;
  @ApiPropertyOptional({
    description: 'For unknown_outcome, dispatch_overdue, retry_overdue and input_awaited: the threshold it passed.',
  })
  threshold_ms?: number;
  @ApiPropertyOptional({ enum: ['policy', 'query'] }) threshold_from?: string;
  @ApiProperty() attempt!: number;
  @ApiProperty() attempts_used!: number;
  @ApiProperty() revision!: number;
  @ApiPropertyOptional({ description: 'For acknowledged: who took the escalation (assignee, by key id, at, note).' })
  acknowledged?: { assignee: string; by: string; at: string; note?: string };
}

export class TriageCountsDto {
  @ApiProperty() total!: number;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'integer' } }) by_kind!: Record<string, number>;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'integer' } }) by_tool!: Record<string, number>;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'integer' } }) by_reason!: Record<string, number>;
}

export class TriageThresholdsDto {
  @ApiProperty() unknown_after_ms!: number;
  @ApiProperty() dispatch_timeout_ms!: number;
  @ApiProperty() retry_grace_ms!: number;
  @ApiProperty() input_after_ms!: number;
}

export class TriageDto {
  @ApiProperty({ type: [TriageItemDto] }) items!: TriageItemDto[];
  @ApiProperty({ type: TriageCountsDto, description: 'Over every item matching the filters, whatever the page.' })
  counts!: TriageCountsDto;
  @ApiProperty({ type: TriageThresholdsDto }) thresholds!: TriageThresholdsDto;
  @ApiPropertyOptional() next_cursor?: string;
  @ApiProperty({ format: 'date-time', description: 'The ledger clock the queue was judged at.' }) as_of!: string;
  @ApiProperty() as_of_position!: number;
}

export class ChangesDto {
  @ApiProperty({ description: 'The log position every projection has applied.' }) position!: number;
  @ApiProperty({ description: 'Whether that position passed `after` before the wait ended.' }) changed!: boolean;
  @ApiProperty({ format: 'date-time' }) as_of!: string;
}

@ApiTags('triage')
@Controller('v1')
export class TriageController {
  constructor(
    @Inject(ProjectionQueries) private readonly queries: ProjectionQueries,
    @Inject(WorkFeed) private readonly feed: WorkFeed,
  ) {}

  @Get('triage')
  @RequireAccess('read')
  @ApiOperation({
    summary:
      'What needs a person now, newest first: escalated steps, steps awaiting approval, unknown outcomes unresolved past a threshold, dispatches in flight past their timeout; with counts per kind, tool and reason.',
  })
  @ApiQuery({ name: 'kind', required: false, enum: TRIAGE_KINDS })
  @ApiQuery({ name: 'tool', required: false, type: String })
  @ApiQuery({ name: 'run_id', required: false, type: String })
  @ApiQuery({ name: 'reason', required: false, type: String })
  @ApiQuery({
    name: 'q',
    required: false,
    type: String,
    description: 'Text the operation_ref contains (case-insensitive).',
  })
  @ApiQuery({ name: 'older_than_ms', required: false, type: Number })
  @ApiQuery({
    name: 'unknown_after_ms',
    required: false,
    type: Number,
    description: `A step verifying at least this long is listed (default ${DEFAULT_TRIAGE_THRESHOLDS.unknown_after_ms}).`,
  })
  @ApiQuery({
    name: 'dispatch_timeout_ms',
    required: false,
    type: Number,
    description: `A step dispatched at least this long is listed, unless its plan names policy.dispatch_timeout_ms (default ${DEFAULT_TRIAGE_THRESHOLDS.dispatch_timeout_ms}).`,
  })
  @ApiQuery({
    name: 'retry_grace_ms',
    required: false,
    type: Number,
    description: `A scheduled retry this long past its not_before that no worker's lease holds is listed as retry_overdue (default ${DEFAULT_TRIAGE_THRESHOLDS.retry_grace_ms}).`,
  })
  @ApiQuery({
    name: 'input_after_ms',
    required: false,
    type: Number,
    description: `A step waiting for a corrected input at least this long is listed as input_awaited (default ${DEFAULT_TRIAGE_THRESHOLDS.input_after_ms}).`,
  })
  @ApiQuery({ name: 'limit', required: false, type: Number })
  @ApiQuery({ name: 'cursor', required: false, type: String })
  @ApiQuery({ name: 'wait_for_position', required: false, type: Number })
  @ApiQuery({ name: 'wait_timeout_ms', required: false, type: Number })
  @ApiOkResponse({ type: TriageDto })
  triage(@CallerParam() caller: Caller, @Query() query: QueryParams) {
    // The work feed knows which steps a worker's lease holds: a held retry is being run, not overdue.
    const held = async (refs: string[]) =>
      new Set(
        (await this.feed.holdersOf(caller, refs)).items.filter((item) => item.held).map((item) => item.operation_ref),
      );
    return this.queries.triage(caller, triageQuery(query, this.queries.settings.maxWaitMs), held);
  }

  @Get('changes')
  @RequireAccess('read')
  @LongPoll('wait_ms')
  @ApiOperation({
    summary: 'Long poll: answers once the projections have applied the log past `after`, or when `wait_ms` runs out.',
  })
  @ApiQuery({ name: 'after', required: false, type: Number })
  @ApiQuery({ name: 'wait_ms', required: false, type: Number, description: 'At most 30000; 0 answers at once.' })
  @ApiOkResponse({ type: ChangesDto })
  changes(@Query() query: QueryParams) {
    return this.queries.changes(changesQuery(query, this.queries.settings.maxWaitMs));
  }
}
