import type { FromSchema } from './from-schema';

/**
 * EnvelopeRecorded's data as submitted (docs/contract.md §3). The envelope is only an object
 * here: it is checked in depth against the step it is recorded on (422 ENVELOPE_INVALID), by the
 * envelope's own schema.
 */
export const ENVELOPE_RECORDED_DATA_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['attempt', 'envelope'],
  properties: {
    attempt: { type: 'integer', minimum: 1, maximum: 1000 },
    envelope: { type: 'object' },
  },
} as const;

export type EnvelopeRecordedFactData = FromSchema<typeof ENVELOPE_RECORDED_DATA_SCHEMA>;
