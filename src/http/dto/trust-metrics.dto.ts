import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

/**
 * The OpenAPI shapes of the trust figures, for the document only: src/http/trust-metrics.controller.ts
 * declares the routes.
 */
export class PendingRecoveryDto {
  @ApiProperty({ description: 'Pending recoveries resolved by a verification.' }) count!: number;
  @ApiProperty() mean_ms!: number;
  @ApiProperty() min_ms!: number;
  @ApiProperty() max_ms!: number;
  @ApiProperty({ description: 'Percentiles are within about 9% (log buckets); min and max are exact.' })
  p50_ms!: number;
  @ApiProperty() p90_ms!: number;
  @ApiProperty() p99_ms!: number;
}

export class TrustReportDto {
  @ApiProperty() operations_planned!: number;
  @ApiProperty({ description: 'Outcomes that had to be verified: unknown envelopes plus in-flight attempts verified.' })
  unknown_outcomes!: number;
  @ApiProperty() unknown_via_envelope!: number;
  @ApiProperty({ description: 'Attempts verified while still dispatched (no envelope ever came back).' })
  unknown_in_flight!: number;
  @ApiProperty() verified_found_committed!: number;
  @ApiProperty() verified_not_found!: number;
  @ApiProperty() resolved_by_verification!: number;
  @ApiProperty() lookup_unavailable!: number;
  @ApiProperty({
    description:
      'Unknown outcomes a person settled as committed (OutcomeVerifiedManually), counted apart from lookups.',
  })
  manually_verified_found_committed!: number;
  @ApiProperty({ description: 'Unknown outcomes a person settled as not committed.' })
  manually_verified_not_found!: number;
  @ApiProperty({ description: 'Steps an operator cancelled.' }) cancelled!: number;
  @ApiProperty({ description: 'Escalations an operator reopened with a new attempt budget.' }) reopened!: number;
  @ApiProperty() duplicate_writes_prevented!: number;
  @ApiProperty() identical_retries_blocked!: number;
  @ApiProperty() unverified_dispatches_refused!: number;
  @ApiProperty() terminal_escalations!: number;
  @ApiProperty() succeeded!: number;
  @ApiProperty({
    description:
      'Late outcomes that may have reached the provider (a success, or an unknown or committed failure), reported by an attempt after a later attempt was granted: the provider may hold two writes.',
  })
  possible_duplicates!: number;
  @ApiProperty() pending_recovery_now!: number;
  @ApiProperty({ type: PendingRecoveryDto }) pending_recovery!: PendingRecoveryDto;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'integer' } }) dispatch_refusals!: Record<
    string,
    number
  >;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'integer' } }) escalations_by_reason!: Record<
    string,
    number
  >;
}

export class ToolTrustReportDto extends TrustReportDto {
  @ApiProperty() tool!: string;
}

export class OverallTrustReportDto extends TrustReportDto {
  @ApiProperty({ description: 'Tools counted.' }) tools!: number;
}

export class TrustMetricsDto {
  @ApiProperty({ type: OverallTrustReportDto }) overall!: OverallTrustReportDto;
  @ApiProperty({ type: [ToolTrustReportDto] }) tools!: ToolTrustReportDto[];
  @ApiPropertyOptional() next_cursor?: string;
  @ApiProperty() as_of_position!: number;
}
