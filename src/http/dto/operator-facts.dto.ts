import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { SubmitAnswerDto } from './responses.dto';

/**
 * The OpenAPI shapes of POST /v1/operator-facts, for the document only: src/http/operator-facts.controller.ts
 * declares the route and OperatorFactsService builds the answer.
 */
export class OperationProblemDto {
  @ApiProperty() type!: string;
  @ApiProperty() title!: string;
  @ApiProperty() status!: number;
  @ApiProperty({ description: 'The stable code the single route would answer for this operation.' }) code!: string;
  @ApiProperty() detail!: string;
  @ApiPropertyOptional() field?: string;
  @ApiPropertyOptional({ type: 'object', additionalProperties: true }) directive?: Record<string, unknown>;
  @ApiPropertyOptional({ type: 'object', additionalProperties: true }) state?: Record<string, unknown>;
  @ApiPropertyOptional() retry_after_seconds?: number;
}

export class OperatorFactOutcomeDto {
  @ApiPropertyOptional({ description: 'Left out only when the refusal is that it looks like a credential.' })
  operation_ref?: string;
  @ApiProperty() event_id!: string;
  @ApiProperty({ enum: ['recorded', 'refused'] }) outcome!: string;
  @ApiPropertyOptional({ type: SubmitAnswerDto, description: "The single route's answer (recorded)." })
  answer?: SubmitAnswerDto;
  @ApiPropertyOptional({ type: OperationProblemDto, description: "The single route's refusal (refused)." })
  problem?: OperationProblemDto;
}

export class OperatorFactsAnswerDto {
  @ApiProperty() recorded!: number;
  @ApiProperty() refused!: number;
  @ApiProperty({ type: [OperatorFactOutcomeDto], description: 'One per operation, in the order of the request.' })
  results!: OperatorFactOutcomeDto[];
}
