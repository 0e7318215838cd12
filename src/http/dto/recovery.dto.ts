import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

/**
 * The OpenAPI shapes of the recovery listing, for the document only: src/http/recovery.controller.ts
 * declares the routes.
 */
export class RecoveryItemDto {
  @ApiProperty() operation_ref!: string;
  @ApiProperty() tool!: string;
  @ApiProperty() run_id!: string;
  @ApiProperty({ enum: ['dispatched', 'verifying'] }) status!: string;
  @ApiProperty({ format: 'date-time', description: 'When the step entered this status (ledger clock).' })
  since!: string;
  @ApiProperty({ description: 'The attempt in flight or to verify.' }) attempt!: number;
  @ApiProperty() attempts_used!: number;
  @ApiProperty({ enum: ['read', 'write'] }) side_effect!: string;
  @ApiProperty() reason!: string;
  @ApiPropertyOptional({ description: "From the step's policy: the lookup to verify with." })
  verification_tool?: string;
  @ApiProperty() revision!: number;
}

export class RecoveryListDto {
  @ApiProperty({ type: [RecoveryItemDto] }) items!: RecoveryItemDto[];
  @ApiPropertyOptional() next_cursor?: string;
  @ApiProperty() as_of_position!: number;
}
