import type { FromSchema } from './from-schema';

export const VERIFICATION_OUTCOMES = ['found_committed', 'not_found', 'lookup_unavailable'] as const;

/** VerificationRecorded's data as submitted (docs/contract.md §3, §4.5): a lookup by operation_ref. */
export const VERIFICATION_RECORDED_DATA_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['outcome', 'checked_at'],
  properties: {
    outcome: { type: 'string', enum: VERIFICATION_OUTCOMES },
    checked_at: { type: 'string', format: 'date-time' },
    evidence_ref: { type: 'string', minLength: 1, maxLength: 200 },
    result: { description: 'What the lookup found; redacted of secrets before it is stored.' },
  },
} as const;

export type VerificationRecordedFactData = FromSchema<typeof VERIFICATION_RECORDED_DATA_SCHEMA>;
