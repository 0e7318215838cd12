import { Controller, Get, Inject, Param, Query } from '@nestjs/common';
import { ApiExtraModels, ApiOkResponse, ApiOperation, ApiParam, ApiQuery, ApiTags } from '@nestjs/swagger';
import { RequireAccess } from '../auth/access';
import { ProjectionQueries } from '../projection-engine/projection-queries';
import { CallerParam, type Caller } from './caller';
import { evidenceQuery, type QueryParams } from './read-queries';
import { READ_TURNS } from './read-turns';
import { EvidenceEntryDto, VerdictDto, EvidenceTrailDto } from './dto/evidence.dto';

@ApiTags('evidence')
@ApiExtraModels(EvidenceEntryDto, VerdictDto)
@Controller('v1/operations')
export class EvidenceController {
  constructor(@Inject(ProjectionQueries) private readonly queries: ProjectionQueries) {}

  @Get(':ref/evidence')
  @RequireAccess('read')
  @ApiOperation({
    summary: 'The evidence trail: every attempt, envelope, refusal, verification and transition, and the verdict.',
  })
  @ApiParam({ name: 'ref', description: 'The operation_ref, percent-encoded as one path segment (run_81%2Fstep_4).' })
  @ApiQuery({
    name: 'wait_for_position',
    required: false,
    type: Number,
    description: 'Answer only once the log is projected this far (503 PROJECTION_LAGGING otherwise).',
  })
  @ApiQuery({ name: 'wait_timeout_ms', required: false, type: Number })
  @ApiQuery({ name: 'limit', required: false, type: Number })
  @ApiQuery({ name: 'cursor', required: false, type: String })
  @ApiOkResponse({ type: EvidenceTrailDto })
  evidence(@CallerParam() caller: Caller, @Param('ref') ref: string, @Query() query: QueryParams) {
    return READ_TURNS.run(() =>
      this.queries.evidence(caller, evidenceQuery(ref, query, this.queries.settings.maxWaitMs)),
    );
  }
}
