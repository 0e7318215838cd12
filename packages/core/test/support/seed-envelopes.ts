/**
 * The contract's envelopes (the article's contract-test table), for any operation_ref: one set of
 * fixtures for every tier of tests, so a change to the envelope shape is made once.
 */
import type { ToolEnvelope, ToolError } from '@recovery-ledger/core';

export const seedEnvelopes = {
  /** Without an evidence_ref the success is proven by the envelope alone. */
  success: (
    ref: string,
    evidenceRef?: string,
    checkedAt = new Date().toISOString(),
    result: unknown = { invoice_id: evidenceRef ?? 'inv_1' },
  ): ToolEnvelope => ({
    ok: true,
    operation_ref: ref,
    commit_state: 'committed',
    result,
    verification: { checked_at: checkedAt, ...(evidenceRef === undefined ? {} : { evidence_ref: evidenceRef }) },
  }),
  invalidRecipient: (ref: string, remaining = 1, field = 'recipient_email'): ToolError => ({
    ok: false,
    code: 'INVALID_RECIPIENT_ADDRESS',
    category: 'validation',
    commit_state: 'not_committed',
    retry: { directive: 'after_input_fix', max_attempts_remaining: remaining },
    next_action: 'correct_input',
    operation_ref: ref,
    safe_details: { field },
    agent_message: 'recipient_email is invalid; request a corrected address.',
    user_message: 'I need a valid recipient address before I can send this.',
  }),
  rateLimited: (
    ref: string,
    notBefore: string,
    remaining = 2,
    category: ToolError['category'] = 'dependency',
  ): ToolError => ({
    ok: false,
    code: 'RATE_LIMITED',
    category,
    commit_state: 'not_committed',
    retry: { directive: 'after_delay', not_before: notBefore, max_attempts_remaining: remaining },
    next_action: 'wait_and_retry',
    operation_ref: ref,
    safe_details: { retry_after: 30 },
    agent_message: 'Rate limited; retry after not_before.',
    user_message: 'Waiting a moment before trying again.',
  }),
  outcomeUnknown: (ref: string, verificationTool = 'get_invoice_by_operation_ref'): ToolError => ({
    ok: false,
    code: 'OUTCOME_UNKNOWN',
    category: 'dependency',
    commit_state: 'unknown',
    retry: { directive: 'never', max_attempts_remaining: 0 },
    next_action: 'verify_operation',
    operation_ref: ref,
    safe_details: { verification_tool: verificationTool },
    agent_message: 'The write may have completed. Verify operation_ref before any new write.',
    user_message: 'The request is being checked before anything is sent again.',
  }),
  missingApproval: (ref: string): ToolError => ({
    ok: false,
    code: 'MISSING_APPROVAL',
    category: 'authorization',
    commit_state: 'not_committed',
    retry: { directive: 'never', max_attempts_remaining: 1 },
    next_action: 'request_approval',
    operation_ref: ref,
    safe_details: {},
    agent_message: 'An approval is needed.',
    user_message: 'This needs an approval first.',
  }),
  alreadyPaid: (ref: string): ToolError => ({
    ok: false,
    code: 'INVOICE_ALREADY_PAID',
    category: 'conflict',
    commit_state: 'not_committed',
    retry: { directive: 'never', max_attempts_remaining: 0 },
    next_action: 'escalate',
    operation_ref: ref,
    safe_details: {},
    agent_message: 'The invoice is already paid.',
    user_message: 'This invoice is already paid.',
  }),
};
