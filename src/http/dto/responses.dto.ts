import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  DIRECTIVE_ACTIONS,
  SIDE_EFFECTS,
  STEP_VIEW_STATUSES,
  SUBMIT_RESULT_STATUSES,
  type EventView,
  type JsonObject,
} from '@recovery-ledger/core';

/** Response shapes, for the OpenAPI document only: the answers are built by the ledger service. */
export class DirectiveDto {
  @ApiProperty({ enum: [...DIRECTIVE_ACTIONS] })
  next_action!: string;
  @ApiPropertyOptional({ format: 'date-time' }) not_before?: string;
  @ApiProperty() attempts_remaining!: number;
}

export class StepViewDto {
  @ApiProperty() operation_ref!: string;
  @ApiProperty({ enum: [...STEP_VIEW_STATUSES] }) status!: string;
  @ApiProperty() revision!: number;
  @ApiPropertyOptional() run_id?: string;
  @ApiPropertyOptional() tool?: string;
  @ApiPropertyOptional({ enum: [...SIDE_EFFECTS] }) side_effect?: string;
  @ApiProperty() attempts_used!: number;
  @ApiProperty() current_attempt!: number;
  @ApiProperty() attempts_remaining!: number;
  @ApiPropertyOptional({ format: 'date-time' }) not_before?: string;
  @ApiPropertyOptional() reason?: string;
  @ApiPropertyOptional({ format: 'date-time' }) since?: string;
  @ApiPropertyOptional({
    format: 'date-time',
    description:
      'While dispatched: the last instant the attempt may reach the provider. The dispatcher starts its call within call_deadline minus since, and aborts it then.',
  })
  call_deadline?: string;
  @ApiPropertyOptional({
    description:
      'The input that approval binds, labelled with its hash: `input` as the plan or the dispatch sent it (inputs holding a secret are refused, never stored), or `recorded: false` when the ledger was sent only the hash.',
    type: 'object',
    required: ['input_hash', 'recorded'],
    properties: {
      input_hash: { type: 'string' },
      recorded: { type: 'boolean' },
      input: { description: 'Any JSON value.' },
    },
  })
  approval_input?: { input_hash: string; recorded: boolean; input?: unknown };
  @ApiPropertyOptional({
    description: 'The input hash the pending (or last) approval request is for; an approval binds to it.',
  })
  approval_input_hash?: string;
  @ApiPropertyOptional({
    description:
      'An outcome that may have reached the provider (a success, or an unknown or committed failure), reported by an attempt after a later attempt was granted: the provider may hold two writes.',
  })
  possible_duplicate?: { attempt: number; recorded_at: string };
  @ApiPropertyOptional({
    description: 'An operator took the escalation (assignee, note, at); it stays escalated until resolved.',
  })
  acknowledged?: { assignee: string; note?: string; at: string };
  @ApiPropertyOptional({ description: 'Why an operator cancelled the step.' }) cancel_reason?: string;
}

export class SubmitResultDto {
  @ApiProperty() event_id!: string;
  @ApiProperty({ enum: [...SUBMIT_RESULT_STATUSES] }) status!: string;
}

export class SubmitAnswerDto {
  @ApiProperty() revision!: number;
  @ApiProperty() position!: number;
  @ApiProperty({ type: StepViewDto }) state!: StepViewDto;
  @ApiProperty({ type: DirectiveDto }) directive!: DirectiveDto;
  @ApiProperty({ type: [SubmitResultDto] }) results!: SubmitResultDto[];
  @ApiPropertyOptional({ description: 'A dispatch on a succeeded step: the original success, replayed.' })
  replayed?: boolean;
  @ApiPropertyOptional({ type: 'object', additionalProperties: true }) success?: Record<string, unknown>;
  @ApiPropertyOptional({
    description:
      'The facts came under the work-feed lease that held the step (Ledger-Lease) and ended it: the ledger gave the lease back in the same request.',
  })
  lease_released?: boolean;
}

/** The contract's `EventView`, published: a field renamed or retyped there does not compile here. */
export class StoredEventDto implements EventView {
  @ApiProperty() revision!: number;
  @ApiProperty() position!: number;
  @ApiProperty() event_id!: string;
  @ApiProperty() type!: string;
  @ApiProperty({ format: 'date-time' }) recorded_at!: string;
  @ApiProperty() actor!: string;
  @ApiPropertyOptional() causation_event_id?: string;
  @ApiPropertyOptional({ description: 'The W3C trace context the fact was submitted under, when it carried one.' })
  traceparent?: string;
  @ApiProperty({ type: 'integer', description: 'The version of the event schema the fact was recorded under.' })
  schema_version!: number;
  @ApiProperty({ type: 'object', additionalProperties: true }) data!: JsonObject;
  @ApiProperty() prev_hash!: string;
  @ApiProperty() hash!: string;
}

export class OperationEventsDto {
  @ApiProperty() operation_ref!: string;
  @ApiProperty() revision!: number;
  @ApiProperty({ type: [StoredEventDto] }) events!: StoredEventDto[];
  @ApiPropertyOptional({ description: 'Pass as ?cursor= for the next events; absent on the last page.' })
  next_cursor?: string;
  @ApiPropertyOptional() as_of_revision?: number;
  @ApiPropertyOptional({ type: StepViewDto }) state?: StepViewDto;
}
