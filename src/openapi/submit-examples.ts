/**
 * The submit examples of the OpenAPI document: the contract table's scenarios (a write whose
 * socket timed out and was verified, an invalid address, a lost approval). Plain data, no import:
 * test/int/ops-openapi-examples.int.spec.ts submits every one of them to the built service, so an
 * example the ledger would refuse cannot stay in the document.
 */
type Body = Record<string, unknown>;

const INVOICE_REF = 'run_81/step_4';
const planInvoice = {
  event_id: '4f6a1c2e-0d7b-4a52-9a43-1c8e2b7d9f10',
  type: 'StepPlanned',
  data: {
    run_id: 'run_81',
    tool: 'create_invoice',
    side_effect: 'write',
    input_hash: 'sha256:9c1f',
    policy: { max_attempts: 3, consistency_window_ms: 30000, verification_tool: 'get_invoice_by_operation_ref' },
  },
};
const dispatchInvoice = {
  event_id: '5a7b2d3f-1e8c-4b63-8b54-2d9f3c8e0a21',
  type: 'AttemptDispatched',
  data: { attempt: 1, input_hash: 'sha256:9c1f' },
};
const outcomeUnknown = {
  ok: false,
  code: 'OUTCOME_UNKNOWN',
  category: 'dependency',
  commit_state: 'unknown',
  retry: { directive: 'never', max_attempts_remaining: 0 },
  next_action: 'verify_operation',
  operation_ref: INVOICE_REF,
  safe_details: { verification_tool: 'get_invoice_by_operation_ref' },
  agent_message: 'The write may have completed. Verify operation_ref before any new write.',
  user_message: 'The request is being checked before anything is sent again.',
};

/**
 * Each example is one submit, for the operation named in `ref`, after the facts in `after` (by
 * example name). The test replays them in this order; the document carries the bodies.
 */
export const SUBMIT_EXAMPLES: Record<string, { summary: string; ref: string; after: string[]; value: Body }> = {
  plan_write: {
    summary: 'Plan a write: create_invoice for run_81, verified by get_invoice_by_operation_ref',
    ref: INVOICE_REF,
    after: [],
    value: { expected_revision: -1, events: [planInvoice] },
  },
  dispatch: {
    summary: 'Ask to dispatch attempt 1 (the gate: call the tool only when this is granted)',
    ref: INVOICE_REF,
    after: ['plan_write'],
    value: { events: [dispatchInvoice] },
  },
  write_socket_timeout: {
    summary: 'Write socket timeout: unknown outcome, verify before any new write',
    ref: INVOICE_REF,
    after: ['plan_write', 'dispatch'],
    value: {
      events: [
        {
          event_id: '6b8c3e4a-2f9d-4c74-9c65-3e0a4d9f1b32',
          type: 'EnvelopeRecorded',
          data: { attempt: 1, envelope: outcomeUnknown },
        },
      ],
    },
  },
  verified_committed: {
    summary: 'The lookup by operation_ref found the invoice: the original step becomes a success',
    ref: INVOICE_REF,
    after: ['plan_write', 'dispatch', 'write_socket_timeout'],
    value: {
      events: [
        {
          event_id: '7c9d4f5b-3a0e-4d85-8d76-4f1b5e0a2c43',
          type: 'VerificationRecorded',
          data: { outcome: 'found_committed', checked_at: '2026-12-02T10:15:04Z', evidence_ref: 'inv_20931' },
        },
      ],
    },
  },
  invalid_recipient: {
    summary: 'Invalid address: not committed, correct the input (an unchanged retry is refused)',
    ref: 'run_81/step_5',
    after: [],
    value: {
      events: [
        {
          event_id: '8d0e5a6c-4b1f-4e96-9e87-5a2c6f1b3d54',
          type: 'StepPlanned',
          data: { run_id: 'run_81', tool: 'send_email', side_effect: 'write', input_hash: 'sha256:51aa' },
        },
        {
          event_id: '9e1f6b7d-5c2a-4fa7-8f98-6b3d7a2c4e65',
          type: 'AttemptDispatched',
          data: { attempt: 1, input_hash: 'sha256:51aa' },
        },
        {
          event_id: 'af2a7c8e-6d3b-4ab8-9a09-7c4e8b3d5f76',
          type: 'EnvelopeRecorded',
          data: {
            attempt: 1,
            envelope: {
              ok: false,
              code: 'INVALID_RECIPIENT_ADDRESS',
              category: 'validation',
              commit_state: 'not_committed',
              retry: { directive: 'after_input_fix', max_attempts_remaining: 1 },
              next_action: 'correct_input',
              operation_ref: 'run_81/step_5',
              safe_details: { field: 'recipient_email' },
              agent_message: 'recipient_email is invalid; request a corrected address.',
              user_message: 'I need a valid recipient address before I can send this.',
            },
          },
        },
      ],
    },
  },
  lost_approval: {
    summary: 'Lost approval: not committed, request approval (the tool is not called again until granted)',
    ref: 'run_81/step_6',
    after: [],
    value: {
      events: [
        {
          event_id: 'b03b8d9f-7e4c-4bc9-8b1a-8d5f9c4e6a87',
          type: 'StepPlanned',
          data: { run_id: 'run_81', tool: 'issue_refund', side_effect: 'write', input_hash: 'sha256:77be' },
        },
        {
          event_id: 'c14c9e0a-8f5d-4cda-9c2b-9e6a0d5f7b98',
          type: 'AttemptDispatched',
          data: { attempt: 1, input_hash: 'sha256:77be' },
        },
        {
          event_id: 'd25d0f1b-9a6e-4deb-8d3c-0f7b1e6a8ca9',
          type: 'EnvelopeRecorded',
          data: {
            attempt: 1,
            envelope: {
              ok: false,
              code: 'MISSING_APPROVAL',
              category: 'authorization',
              commit_state: 'not_committed',
              retry: { directive: 'never', max_attempts_remaining: 1 },
              next_action: 'request_approval',
              operation_ref: 'run_81/step_6',
              safe_details: {},
              agent_message: 'This action needs an approval before it can run.',
              user_message: 'This needs approval before I can continue.',
            },
          },
        },
      ],
    },
  },
  approval_granted: {
    summary: 'A person with the authority grants the approval: one new attempt may run',
    ref: 'run_81/step_6',
    after: ['lost_approval'],
    value: {
      events: [
        {
          event_id: 'e36e1a2c-0b7f-4efc-9e4d-1a8c2f7b9dba',
          type: 'ApprovalRecorded',
          data: { decision: 'granted', approver: 'finance-lead@example.com', reason: 'refund under the monthly limit' },
        },
      ],
    },
  },
};
