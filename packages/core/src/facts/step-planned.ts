import { IDENTIFIER_PATTERN } from '../domain/identifier-grammar';
import type { FromSchema } from './from-schema';

export const SIDE_EFFECTS = ['read', 'write'] as const;

/** An identifier field (docs/contract.md §9): bounded, and of the identifier grammar. */
export const identifierSchema = <N extends number>(maxLength: N) =>
  ({ type: 'string', minLength: 1, maxLength, pattern: IDENTIFIER_PATTERN.source }) as const;

/** A step's policy as submitted: every field optional, the ledger fills in its defaults. */
export const STEP_POLICY_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    max_attempts: {
      type: 'integer',
      minimum: 1,
      maximum: 100,
      description: 'Attempts in all, the first included (default 3).',
    },
    consistency_window_ms: {
      type: 'integer',
      minimum: 0,
      maximum: 86400000,
      description: 'How long after a dispatch not_found is inconclusive (default 30000).',
    },
    verification_tool: {
      ...identifierSchema(100),
      description: 'The tool that looks the operation up by its operation_ref.',
    },
    max_consecutive_dependency_failures: {
      type: 'integer',
      minimum: 1,
      maximum: 100,
      description: 'Consecutive dependency failures before the step escalates (default 3).',
    },
    dispatch_timeout_ms: {
      type: 'integer',
      minimum: 1000,
      maximum: 86400000,
      description:
        'With no envelope and no live lease this long after a dispatch, the work feed hands the step out for verification.',
    },
  },
} as const;

/** StepPlanned's data (docs/contract.md §3): the schema, and the type derived from it. */
export const STEP_PLANNED_DATA_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['run_id', 'tool', 'side_effect', 'input_hash'],
  properties: {
    run_id: identifierSchema(200),
    tool: identifierSchema(100),
    side_effect: { type: 'string', enum: SIDE_EFFECTS },
    input_hash: {
      ...identifierSchema(200),
      description: 'A hash of the canonical input: an unchanged retry after correct_input is refused by it.',
    },
    policy: STEP_POLICY_SCHEMA,
    input: {
      description: "The tool's input, for the work feed to hand to a worker; its canonical SHA-256 must be input_hash.",
    },
  },
} as const;

export type StepPolicyFactData = FromSchema<typeof STEP_POLICY_SCHEMA>;
export type StepPlannedFactData = FromSchema<typeof STEP_PLANNED_DATA_SCHEMA>;
