import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { TRIAGE_KINDS } from '@recovery-ledger/projections';

/**
 * The OpenAPI shapes of the triage queue and the changes poll, for the document only:
 * src/http/triage.controller.ts declares the routes.
 */
export class TriageItemDto {
  @ApiProperty({ enum: TRIAGE_KINDS, description: 'Why the step needs a person.' }) kind!: string;
  @ApiProperty() operation_ref!: string;
  @ApiProperty() run_id!: string;
  @ApiProperty() tool!: string;
  @ApiProperty({
    enum: ['escalated', 'awaiting_approval', 'verifying', 'dispatched', 'retry_scheduled', 'needs_input'],
  })
  status!: string;
  @ApiProperty({ description: 'Reason code of the transition that put the step in its status.' }) reason!: string;
  @ApiProperty({ format: 'date-time' }) since!: string;
  @ApiProperty({ description: 'Time in its status at as_of (ledger clock).' }) age_ms!: number;
  @ApiPropertyOptional({
    description: 'For unknown_outcome, dispatch_overdue, retry_overdue and input_awaited: the threshold it passed.',
  })
  threshold_ms?: number;
  @ApiPropertyOptional({ enum: ['policy', 'query'] }) threshold_from?: string;
  @ApiProperty() attempt!: number;
  @ApiProperty() attempts_used!: number;
  @ApiProperty() revision!: number;
  @ApiPropertyOptional({ description: 'For acknowledged: who took the escalation (assignee, by key id, at, note).' })
  acknowledged?: { assignee: string; by: string; at: string; note?: string };
}

export class TriageCountsDto {
  @ApiProperty() total!: number;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'integer' } }) by_kind!: Record<string, number>;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'integer' } }) by_tool!: Record<string, number>;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'integer' } }) by_reason!: Record<string, number>;
}

export class TriageThresholdsDto {
  @ApiProperty() unknown_after_ms!: number;
  @ApiProperty() dispatch_timeout_ms!: number;
  @ApiProperty() retry_grace_ms!: number;
  @ApiProperty() input_after_ms!: number;
}

export class TriageWaitingItemDto {
  @ApiProperty() operation_ref!: string;
  @ApiProperty() run_id!: string;
  @ApiProperty() tool!: string;
  @ApiProperty() reason!: string;
  @ApiProperty({ format: 'date-time', description: 'When it began verifying.' }) since!: string;
  @ApiProperty({
    format: 'date-time',
    description: 'When it joins the queue as unknown_outcome (ledger clock), unless a lookup settles it first.',
  })
  due_at!: string;
  @ApiProperty() threshold_ms!: number;
  @ApiProperty({ enum: ['policy', 'query'] }) threshold_from!: string;
  @ApiProperty() revision!: number;
}

export class TriageDto {
  @ApiProperty({ type: [TriageItemDto] }) items!: TriageItemDto[];
  @ApiProperty({ type: TriageCountsDto, description: 'Over every item matching the filters, whatever the page.' })
  counts!: TriageCountsDto;
  @ApiProperty({ type: TriageThresholdsDto }) thresholds!: TriageThresholdsDto;
  @ApiProperty({
    type: [TriageWaitingItemDto],
    description:
      'Unknown outcomes that need no person yet, soonest due first (at most 20); empty when the query asks for another kind.',
  })
  waiting!: TriageWaitingItemDto[];
  @ApiPropertyOptional() next_cursor?: string;
  @ApiProperty({ format: 'date-time', description: 'The ledger clock the queue was judged at.' }) as_of!: string;
  @ApiProperty() as_of_position!: number;
}

export class ChangesDto {
  @ApiProperty({ description: 'The log position every projection has applied.' }) position!: number;
  @ApiProperty({ description: 'Whether that position passed `after` before the wait ended.' }) changed!: boolean;
  @ApiProperty({ format: 'date-time' }) as_of!: string;
}
