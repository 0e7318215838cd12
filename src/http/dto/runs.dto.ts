import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { STEP_STATUSES } from '@recovery-ledger/core';

/**
 * The OpenAPI shapes of runs, for the document only: src/http/runs.controller.ts declares the routes.
 */
export class RunStepDto {
  @ApiProperty() operation_ref!: string;
  @ApiProperty() tool!: string;
  @ApiProperty({ enum: ['read', 'write'] }) side_effect!: string;
  @ApiProperty({ enum: STEP_STATUSES }) status!: string;
  @ApiProperty({ format: 'date-time' }) since!: string;
  @ApiProperty() reason!: string;
  @ApiProperty() attempts_used!: number;
  @ApiProperty() current_attempt!: number;
  @ApiProperty({ format: 'date-time' }) planned_at!: string;
  @ApiProperty() planned_position!: number;
  @ApiProperty() revision!: number;
}

export class RunSummaryDto {
  @ApiProperty() run_id!: string;
  @ApiProperty() total!: number;
  @ApiProperty({ description: 'Steps neither succeeded nor escalated.' }) open!: number;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'integer' }, description: 'Steps per status.' })
  counts!: Record<string, number>;
  @ApiProperty({ format: 'date-time' }) started_at!: string;
  @ApiProperty({ format: 'date-time' }) updated_at!: string;
  @ApiProperty({ type: [RunStepDto] }) steps!: RunStepDto[];
  @ApiPropertyOptional() next_cursor?: string;
  @ApiProperty() as_of_position!: number;
}

export class RunListItemDto {
  @ApiProperty() run_id!: string;
  @ApiProperty() total!: number;
  @ApiProperty() open!: number;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'integer' } }) counts!: Record<string, number>;
  @ApiProperty({ format: 'date-time' }) started_at!: string;
  @ApiProperty({ format: 'date-time' }) updated_at!: string;
}

export class RunListDto {
  @ApiProperty({ type: [RunListItemDto] }) runs!: RunListItemDto[];
  @ApiPropertyOptional() next_cursor?: string;
  @ApiProperty() as_of_position!: number;
}
