import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  Allow,
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsIn,
  IsInt,
  IsISO8601,
  IsObject,
  IsOptional,
  IsString,
  IsUUID,
  Matches,
  Max,
  MaxLength,
  Min,
  MinLength,
  ValidateNested,
} from 'class-validator';
import { SUBMITTED_FACT_TYPES, type SubmittedFactType } from '../../domain/events';

/** Identifiers are printable and bounded: they end up in stream names, logs and the UI. */
export const IDENTIFIER_PATTERN = /^[\x21-\x7e]+$/;

export class SubmittedEventDto {
  @ApiProperty({ format: 'uuid', description: 'Chosen by the client before the first send; resubmitting it is a no-op.' })
  @IsUUID('all')
  event_id!: string;

  @ApiProperty({ enum: SUBMITTED_FACT_TYPES })
  @IsIn(SUBMITTED_FACT_TYPES)
  type!: SubmittedFactType;

  @ApiProperty({ type: 'object', additionalProperties: true, description: 'The fact, shaped by its type (SPEC §9).' })
  @IsObject()
  data!: Record<string, unknown>;
}

export class SubmitEventsDto {
  @ApiPropertyOptional({ description: 'The stream revision the client read; -1 for a new operation.', minimum: -1 })
  @IsOptional()
  @IsInt()
  @Min(-1)
  expected_revision?: number;

  @ApiProperty({ type: [SubmittedEventDto] })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(10_000)
  @ValidateNested({ each: true })
  @Type(() => SubmittedEventDto)
  events!: SubmittedEventDto[];
}

// ---- data of each submitted type -----------------------------------------------------------------

export class StepPolicyDto {
  @IsOptional() @IsInt() @Min(1) @Max(100) max_attempts?: number;
  @IsOptional() @IsInt() @Min(0) @Max(86_400_000) consistency_window_ms?: number;
  @IsOptional() @IsString() @MinLength(1) @MaxLength(100) @Matches(IDENTIFIER_PATTERN) verification_tool?: string;
  @IsOptional() @IsInt() @Min(1) @Max(100) max_consecutive_dependency_failures?: number;
  /** With no envelope and no live lease this long after a dispatch, the work feed hands the step out for verification. */
  @IsOptional() @IsInt() @Min(1000) @Max(86_400_000) dispatch_timeout_ms?: number;
}

export class StepPlannedDataDto {
  @IsString() @MinLength(1) @MaxLength(200) @Matches(IDENTIFIER_PATTERN) run_id!: string;
  @IsString() @MinLength(1) @MaxLength(100) @Matches(IDENTIFIER_PATTERN) tool!: string;
  @IsIn(['read', 'write']) side_effect!: 'read' | 'write';
  @IsString() @MinLength(1) @MaxLength(200) @Matches(IDENTIFIER_PATTERN) input_hash!: string;
  @IsOptional() @IsObject() @ValidateNested() @Type(() => StepPolicyDto) policy?: StepPolicyDto;
  /** The tool's input, for the work feed to hand to a worker; its canonical SHA-256 must be input_hash. */
  @IsOptional() @Allow() input?: unknown;
}

export class AttemptDispatchedDataDto {
  @IsInt() @Min(1) @Max(1000) attempt!: number;
  @IsString() @MinLength(1) @MaxLength(200) @Matches(IDENTIFIER_PATTERN) input_hash!: string;
}

export class EnvelopeRecordedDataDto {
  @IsInt() @Min(1) @Max(1000) attempt!: number;
  /** Checked in depth against the step it is recorded on (422 ENVELOPE_INVALID), not here. */
  @IsObject() envelope!: Record<string, unknown>;
}

export class VerificationRecordedDataDto {
  @IsIn(['found_committed', 'not_found', 'lookup_unavailable'])
  outcome!: 'found_committed' | 'not_found' | 'lookup_unavailable';
  @IsISO8601({ strict: true, strictSeparator: true }) checked_at!: string;
  @IsOptional() @IsString() @MinLength(1) @MaxLength(200) evidence_ref?: string;
  /** What the lookup found; free-form, redacted before it is stored. */
  @IsOptional() @Allow() result?: unknown;
}

export class ApprovalRecordedDataDto {
  @IsIn(['granted', 'denied']) decision!: 'granted' | 'denied';
  @IsString() @MinLength(1) @MaxLength(200) approver!: string;
  @IsOptional() @IsString() @MaxLength(1000) reason?: string;
}

export const FACT_DATA_DTOS: Record<SubmittedFactType, new () => object> = {
  StepPlanned: StepPlannedDataDto,
  AttemptDispatched: AttemptDispatchedDataDto,
  EnvelopeRecorded: EnvelopeRecordedDataDto,
  VerificationRecorded: VerificationRecordedDataDto,
  ApprovalRecorded: ApprovalRecordedDataDto,
};
