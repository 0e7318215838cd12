import { IDENTIFIER_PATTERN } from '../domain/identifier-grammar';
import type { FromSchema } from './from-schema';

export const APPROVAL_DECISIONS = ['granted', 'denied'] as const;

/** ApprovalRecorded's data (docs/contract.md §4.4): the schema, and the type derived from it. */
export const APPROVAL_RECORDED_DATA_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['decision', 'approver'],
  properties: {
    decision: { type: 'string', enum: APPROVAL_DECISIONS },
    approver: { type: 'string', minLength: 1, maxLength: 200 },
    reason: { type: 'string', maxLength: 1000 },
    input_hash: {
      type: 'string',
      minLength: 1,
      maxLength: 200,
      pattern: IDENTIFIER_PATTERN.source,
      description:
        'The input the approval is for; when given it must be the one the step asks approval for (the ledger records it either way).',
    },
  },
} as const;

export type ApprovalRecordedFactData = FromSchema<typeof APPROVAL_RECORDED_DATA_SCHEMA>;
