import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  Allow,
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsIn,
  IsInt,
  IsObject,
  IsOptional,
  IsString,
  IsUUID,
  Matches,
  Max,
  MaxLength,
  Min,
  MinLength,
  ValidateBy,
  ValidateIf,
  ValidateNested,
} from 'class-validator';
import {
  APPROVAL_DECISIONS,
  MANUAL_OUTCOMES,
  MAX_CALL_WINDOW_MS,
  MAX_REOPEN_ATTEMPTS,
  type ManualOutcome,
  SIDE_EFFECTS,
  SUBMITTED_FACT_TYPES,
  VERIFICATION_OUTCOMES,
  type ApprovalDecision,
  type SideEffect,
  type SubmittedFactType,
  type VerificationOutcome,
} from '@recovery-ledger/core/domain/events';
import { CLIENT_EVENT_ID_PREFIX, IDENTIFIER_PATTERN } from '@recovery-ledger/core/domain/identifier-grammar';
import { isRfc3339Instant } from '@recovery-ledger/core/shared/rfc3339';

const IsRfc3339Instant = () =>
  ValidateBy({
    name: 'isRfc3339Instant',
    validator: {
      validate: (value) => isRfc3339Instant(value),
      defaultMessage: () => '$property must be an RFC 3339 instant with a time zone, on a real date',
    },
  });

/**
 * An optional typed field may be left out, never sent as null: class-validator's @IsOptional lets
 * null through, which reached the decider as a value (`expected_revision: null` was answered 409)
 * and the log as `policy: null`. The published schema offers no null either.
 */
const IsAbsentOrValid = () => ValidateIf((_object, value) => value !== undefined);

const IDENTIFIER_MESSAGE = {
  message: '$property must be ASCII letters, digits and _ . : / @ + = # ~ - (starting with a letter, digit or _)',
};

export class SubmittedEventDto {
  @ApiProperty({
    format: 'uuid',
    description: 'Chosen by the client before the first send; resubmitting it is a no-op.',
  })
  @IsUUID('all')
  @Matches(CLIENT_EVENT_ID_PREFIX, {
    message: '$property must not be a version 8 UUID: those are the ids the ledger derives',
  })
  event_id!: string;

  @ApiProperty({ enum: SUBMITTED_FACT_TYPES })
  @IsIn(SUBMITTED_FACT_TYPES)
  type!: SubmittedFactType;

  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: 'The fact, shaped by its type (docs/contract.md §9).',
  })
  @IsObject()
  data!: Record<string, unknown>;
}

export class SubmitEventsDto {
  @ApiPropertyOptional({ description: 'The stream revision the client read; -1 for a new operation.', minimum: -1 })
  @IsAbsentOrValid()
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
  @IsAbsentOrValid() @IsInt() @Min(1) @Max(100) max_attempts?: number;
  @IsAbsentOrValid() @IsInt() @Min(0) @Max(86_400_000) consistency_window_ms?: number;
  @IsAbsentOrValid()
  @IsString()
  @MinLength(1)
  @MaxLength(100)
  @Matches(IDENTIFIER_PATTERN, IDENTIFIER_MESSAGE)
  verification_tool?: string;
  @IsAbsentOrValid() @IsInt() @Min(1) @Max(100) max_consecutive_dependency_failures?: number;
  /** With no envelope and no live lease this long after a dispatch, the work feed hands the step out for verification. */
  @IsAbsentOrValid() @IsInt() @Min(1000) @Max(86_400_000) dispatch_timeout_ms?: number;
}

export class StepPlannedDataDto {
  @IsString() @MinLength(1) @MaxLength(200) @Matches(IDENTIFIER_PATTERN, IDENTIFIER_MESSAGE) run_id!: string;
  @IsString() @MinLength(1) @MaxLength(100) @Matches(IDENTIFIER_PATTERN, IDENTIFIER_MESSAGE) tool!: string;
  @IsIn(SIDE_EFFECTS) side_effect!: SideEffect;
  @IsString() @MinLength(1) @MaxLength(200) @Matches(IDENTIFIER_PATTERN, IDENTIFIER_MESSAGE) input_hash!: string;
  @IsAbsentOrValid() @IsObject() @ValidateNested() @Type(() => StepPolicyDto) policy?: StepPolicyDto;
  /** The tool's input, for the work feed to hand to a worker; its canonical SHA-256 must be input_hash. */
  @IsOptional() @Allow() input?: unknown;
}

export class AttemptDispatchedDataDto {
  @IsInt() @Min(1) @Max(1000) attempt!: number;
  @IsString() @MinLength(1) @MaxLength(200) @Matches(IDENTIFIER_PATTERN, IDENTIFIER_MESSAGE) input_hash!: string;
  @IsAbsentOrValid() @IsInt() @Min(1) @Max(MAX_CALL_WINDOW_MS) call_window_ms?: number;
}

export class EnvelopeRecordedDataDto {
  @IsInt() @Min(1) @Max(1000) attempt!: number;
  /** Checked in depth against the step it is recorded on (422 ENVELOPE_INVALID), not here. */
  @IsObject() envelope!: Record<string, unknown>;
}

export class VerificationRecordedDataDto {
  @IsIn(VERIFICATION_OUTCOMES)
  outcome!: VerificationOutcome;
  @IsRfc3339Instant() checked_at!: string;
  @IsAbsentOrValid() @IsString() @MinLength(1) @MaxLength(200) evidence_ref?: string;
  /** What the lookup found; free-form, redacted before it is stored. */
  @IsOptional() @Allow() result?: unknown;
}

export class ApprovalRecordedDataDto {
  @IsIn(APPROVAL_DECISIONS) decision!: ApprovalDecision;
  @IsString() @MinLength(1) @MaxLength(200) approver!: string;
  @IsAbsentOrValid() @IsString() @MaxLength(1000) reason?: string;
  @IsAbsentOrValid()
  @IsString()
  @MinLength(1)
  @MaxLength(200)
  @Matches(IDENTIFIER_PATTERN, IDENTIFIER_MESSAGE)
  input_hash?: string;
}

export class OutcomeVerifiedManuallyDataDto {
  @IsIn(MANUAL_OUTCOMES) outcome!: ManualOutcome;
  @IsString() @MinLength(1) @MaxLength(1000) note!: string;
  @IsAbsentOrValid() @IsString() @MinLength(1) @MaxLength(200) evidence_ref?: string;
}

export class StepCancelledDataDto {
  @IsString() @MinLength(1) @MaxLength(1000) reason!: string;
}

export class StepReopenedDataDto {
  @IsInt() @Min(1) @Max(MAX_REOPEN_ATTEMPTS) attempts!: number;
  @IsString() @MinLength(1) @MaxLength(1000) reason!: string;
}

export class EscalationAcknowledgedDataDto {
  @IsString() @MinLength(1) @MaxLength(200) assignee!: string;
  @IsAbsentOrValid() @IsString() @MaxLength(1000) note?: string;
}

export const FACT_DATA_DTOS: Record<SubmittedFactType, new () => object> = {
  OutcomeVerifiedManually: OutcomeVerifiedManuallyDataDto,
  StepCancelled: StepCancelledDataDto,
  StepReopened: StepReopenedDataDto,
  EscalationAcknowledged: EscalationAcknowledgedDataDto,
  StepPlanned: StepPlannedDataDto,
  AttemptDispatched: AttemptDispatchedDataDto,
  EnvelopeRecorded: EnvelopeRecordedDataDto,
  VerificationRecorded: VerificationRecordedDataDto,
  ApprovalRecorded: ApprovalRecordedDataDto,
};
