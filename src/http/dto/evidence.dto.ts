import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

/**
 * The OpenAPI shapes of the evidence trail, for the document only: src/http/evidence.controller.ts
 * declares the routes.
 */
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
