import { OPERATOR_FACT_TYPES } from '../domain/events';
import { EVENT_ID_SCHEMA } from './submitted-facts';

/**
 * The most operations one `POST /v1/operator-facts` names (docs/contract.md §9, "Operator facts
 * over many operations"): enough for a page of the triage queue, bounded so that one request's cost
 * (one decision and one append per operation, in order) stays close to that of the single route's.
 * A longer list is refused whole, 413 TOO_MANY_OPERATIONS: send the rest in another request.
 */
export const MAX_OPERATIONS_PER_REQUEST = 100;

/**
 * The body of `POST /v1/operator-facts`: one operator fact (§4.10), and the operations to record it
 * on, each with the event id its copy of the fact gets (chosen by the client, as on the single
 * route, so that a resend appends nothing). The fact's data is read after, against its type's
 * schema in SUBMITTED_FACTS. The list's bound is checked before this shape, so that a list over it is
 * answered TOO_MANY_OPERATIONS whatever else it holds.
 */
export const OPERATOR_FACTS_BODY_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['fact', 'operations'],
  properties: {
    fact: {
      type: 'object',
      additionalProperties: false,
      required: ['type', 'data'],
      properties: {
        type: { type: 'string', enum: OPERATOR_FACT_TYPES },
        data: { type: 'object' },
      },
    },
    operations: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_OPERATIONS_PER_REQUEST,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['operation_ref', 'event_id'],
        properties: {
          operation_ref: {
            type: 'string',
            description: 'The operation to record the fact on, as sent in a path, decoded.',
          },
          event_id: EVENT_ID_SCHEMA,
        },
      },
    },
  },
} as const;
