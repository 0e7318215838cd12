import { identifierSchema } from './step-planned';
import type { FromSchema } from './from-schema';

/** The longest call window a dispatcher may declare: a day, as the plan's dispatch timeout. */
export const MAX_CALL_WINDOW_MS = 86_400_000;

/** AttemptDispatched's data as submitted (docs/contract.md §3, §4.5): the gate's question. */
export const ATTEMPT_DISPATCHED_DATA_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['attempt', 'input_hash'],
  properties: {
    attempt: { type: 'integer', minimum: 1, maximum: 1000 },
    input_hash: identifierSchema(200),
    call_window_ms: {
      type: 'integer',
      minimum: 1,
      maximum: MAX_CALL_WINDOW_MS,
      description:
        "The longest the dispatcher keeps its call open: it starts the call within it and aborts it at its end. The ledger records the call deadline (the smallest of this, the plan's dispatch_timeout_ms and the lease it was sent under); a not_found is conclusive only a consistency window after it.",
    },
    input: {
      description:
        "The tool's input for this attempt (a corrected input), so an approver reads what they approve; its canonical SHA-256 must be input_hash, and it is refused when it holds what looks like a secret, as the plan's input is.",
    },
  },
} as const;

export type AttemptDispatchedFactData = FromSchema<typeof ATTEMPT_DISPATCHED_DATA_SCHEMA>;
