import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

/**
 * The OpenAPI shapes of the work feed (its lease bodies and answers), for the document only:
 * src/http/work.controller.ts declares the routes.
 */
export class WorkLeaseDto {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ description: 'The worker the item is handed to.' }) holder!: string;
  @ApiProperty({
    format: 'date-time',
    description: 'Until when no one else is handed the item (ledger clock); renew before it.',
  })
  expires_at!: string;
  @ApiPropertyOptional({ description: 'The worker whose expired lease this one took over.' }) took_over_from?: string;
}

export class LeaseViewDto {
  @ApiProperty({
    description: 'Whether a worker holds the operation now (an unreleased lease, not expired by the ledger clock).',
  })
  held!: boolean;
  @ApiPropertyOptional({ description: 'The worker that holds it.' }) holder?: string;
  @ApiPropertyOptional({ format: 'date-time', description: 'Until when, unless renewed (ledger clock).' })
  expires_at?: string;
  @ApiPropertyOptional({ description: 'The worker whose expired lease this one took over.' }) took_over_from?: string;
}

export class LeaseListItemDto extends LeaseViewDto {
  @ApiProperty() operation_ref!: string;
}

export class LeaseListDto {
  @ApiProperty({ type: [LeaseListItemDto] }) items!: LeaseListItemDto[];
}

export class WorkDirectiveDto {
  @ApiProperty({ enum: ['dispatch', 'verify_operation'] }) next_action!: string;
  @ApiProperty() attempts_remaining!: number;
}

export class WorkItemDto {
  @ApiProperty() operation_ref!: string;
  @ApiProperty() run_id!: string;
  @ApiProperty() tool!: string;
  @ApiProperty({ enum: ['read', 'write'] }) side_effect!: string;
  @ApiProperty({
    enum: ['dispatch', 'verify'],
    description: 'dispatch: ask the gate for `attempt`, then call the tool; verify: look the operation_ref up.',
  })
  kind!: string;
  @ApiProperty({ description: 'The step status the item was judged on.' }) status!: string;
  @ApiProperty({ type: WorkDirectiveDto }) directive!: WorkDirectiveDto;
  @ApiProperty({ description: 'The attempt to dispatch, or the attempt in flight to verify.' }) attempt!: number;
  @ApiProperty() input_hash!: string;
  @ApiPropertyOptional({
    description: 'The input the step was planned with (dispatch items of steps planned with one).',
  })
  input?: unknown;
  @ApiPropertyOptional() verification_tool?: string;
  @ApiProperty({ type: 'object', additionalProperties: true }) policy!: Record<string, unknown>;
  @ApiProperty() revision!: number;
  @ApiProperty({ format: 'date-time' }) due_at!: string;
  @ApiProperty({ type: WorkLeaseDto }) lease!: WorkLeaseDto;
}

export class WorkAnswerDto {
  @ApiProperty({ type: [WorkItemDto] }) items!: WorkItemDto[];
}

export class RenewLeaseDto {
  @ApiProperty({ format: 'uuid' }) lease_id!: string;
  @ApiPropertyOptional({ minimum: 1000, maximum: 600_000, description: 'From now (default 30 s).' }) lease_ms?: number;
}

export class RenewAnswerDto {
  @ApiProperty({ type: WorkLeaseDto }) lease!: WorkLeaseDto;
}

export class ReleaseLeaseDto {
  @ApiProperty({ format: 'uuid' }) lease_id!: string;
  @ApiPropertyOptional({
    minimum: 0,
    maximum: 86_400_000,
    description: 'Keep the item from everyone this long (a check that must wait for a window).',
  })
  hold_ms?: number;
}

export class ReleaseAnswerDto {
  @ApiProperty({ description: 'False when this lease no longer held the item.' }) released!: boolean;
}
