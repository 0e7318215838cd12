import { Controller, Get, Inject, Param, Query } from '@nestjs/common';
import {
  ApiExtraModels,
  ApiOkResponse,
  ApiOperation,
  ApiParam,
  ApiProperty,
  ApiPropertyOptional,
  ApiQuery,
  ApiTags,
} from '@nestjs/swagger';
import { RequireAccess } from '../auth/access';
import { ProjectionQueries } from '../projection-engine/projection-queries';
import { CallerParam, type Caller } from './caller';
import { evidenceQuery, type QueryParams } from './read-queries';
import { READ_TURNS } from './read-turns';

export class EvidenceEntryDto {
  @ApiProperty() revision!: number;
  @ApiProperty() position!: number;
  @ApiProperty() event_id!: string;
  @ApiProperty() type!: string;
  @ApiProperty({ enum: ['plan', 'attempt', 'envelope', 'refusal', 'verification', 'approval', 'transition', 'other'] })
  kind!: string;
  @ApiProperty({ format: 'date-time' }) recorded_at!: string;
  @ApiProperty({ description: 'The id of the key that submitted it (never the key itself).' }) actor!: string;
  @ApiPropertyOptional({ description: 'For what the ledger derived: the submitted fact that caused it.' })
  caused_by?: string;
  @ApiProperty() summary!: string;
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: 'The event data as stored (secrets redacted).',
  })
  data!: Record<string, unknown>;
}

export class VerdictDto {
  @ApiProperty() status!: string;
  @ApiProperty() terminal!: boolean;
  @ApiProperty({ enum: ['committed', 'not_committed', 'unknown'] }) commit_state!: string;
  @ApiProperty({ enum: ['envelope', 'verification', 'manual_verification', 'none'] }) proven_by!: string;
  @ApiPropertyOptional({ description: 'The trail entry that proves the commit state.' }) proof_event_id?: string;
  @ApiPropertyOptional() attempt?: number;
  @ApiPropertyOptional() verification_tool?: string;
  @ApiPropertyOptional() evidence_ref?: string;
  @ApiProperty() reason!: string;
  @ApiProperty() duplicates_prevented!: number;
  @ApiProperty({ example: 'committed — verified via get_invoice_by_operation_ref, evidence inv_123' })
  statement!: string;
}

export class EvidenceTrailDto {
  @ApiProperty() operation_ref!: string;
  @ApiPropertyOptional() run_id?: string;
  @ApiPropertyOptional() tool?: string;
  @ApiPropertyOptional({ enum: ['read', 'write'] }) side_effect?: string;
  @ApiProperty() status!: string;
  @ApiProperty() revision!: number;
  @ApiProperty({ type: VerdictDto }) verdict!: VerdictDto;
  @ApiPropertyOptional({
    description:
      'An outcome that may have reached the provider (a success, or an unknown or committed failure), reported by an attempt after a later attempt was granted: the provider may hold two writes.',
  })
  possible_duplicate?: { attempt: number; event_id: string };
  @ApiProperty({ type: [EvidenceEntryDto] }) entries!: EvidenceEntryDto[];
  @ApiPropertyOptional({ description: 'Pass as ?cursor= for the next entries.' }) next_cursor?: string;
  @ApiProperty({ description: 'The log position the projection had applied when it answered.' })
  as_of_position!: number;
}

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
