import { Controller, Get, Inject, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { DEFAULT_TRIAGE_THRESHOLDS, TRIAGE_KINDS } from '@recovery-ledger/projections';
import { RequireAccess } from '../auth/access';
import { LongPoll } from './security/long-poll-limit';
import { ProjectionQueries } from '../projection-engine/projection-queries';
import { WorkFeed } from '../work/work-feed';
import { CallerParam, type Caller } from './caller';
import { changesQuery, triageQuery, type QueryParams } from './read-queries';
import { TriageDto, ChangesDto } from './dto/triage.dto';

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
    description: `A step verifying at least this long is listed; without it, each step once its plan's policy.consistency_window_ms has passed since it began verifying, when a lookup can settle it either way (a plan without one: ${DEFAULT_TRIAGE_THRESHOLDS.unknown_after_ms}).`,
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
    return this.queries.triage(caller, triageQuery(query, this.queries.settings.maxWaitMs), (refs) =>
      this.feed.heldOf(caller, refs),
    );
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
