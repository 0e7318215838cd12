import fc from 'fast-check';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { DEFAULT_ENVELOPE_LIMITS, envelopeJsonSchema, validateEnvelope } from '@recovery-ledger/core';
import { invalidRecipient, missingApproval, outcomeUnknown, rateLimited, REF, success, at } from '../support/given';

const write = { operationRef: REF, sideEffect: 'write' as const };
const read = { operationRef: REF, sideEffect: 'read' as const };

function rejects(
  input: unknown,
  field: string,
  context: { operationRef: string; sideEffect: 'read' | 'write' } = write,
) {
  const result = validateEnvelope(input, context);
  if (result.ok) throw new Error(`expected ${field} to be refused`);
  expect(result.field).toBe(field);
}

describe('validateEnvelope', () => {
  it.each([
    ['success', success()],
    ['validation', invalidRecipient()],
    ['rate limit', rateLimited(at(1000))],
    ['unknown', outcomeUnknown()],
    ['approval', missingApproval()],
  ])('accepts a contract envelope: %s', (_name, envelope) => {
    const result = validateEnvelope(envelope, write);
    expect(result.ok).toBe(true);
    if (result.ok) expect(result.envelope).toEqual(envelope);
  });

  it('requires every field of a write error', () => {
    for (const field of [
      'code',
      'category',
      'commit_state',
      'retry',
      'next_action',
      'operation_ref',
      'safe_details',
      'agent_message',
      'user_message',
    ]) {
      const envelope: Record<string, unknown> = { ...outcomeUnknown() };
      delete envelope[field];
      rejects(envelope, field);
    }
  });

  it('enforces the consistency rules', () => {
    rejects(
      { ...outcomeUnknown(), retry: { directive: 'after_delay', not_before: at(1), max_attempts_remaining: 0 } },
      'retry.directive',
    );
    rejects({ ...outcomeUnknown(), next_action: 'escalate' }, 'next_action');
    rejects(
      { ...rateLimited(at(1)), retry: { directive: 'after_delay', max_attempts_remaining: 1 } },
      'retry.not_before',
    );
    rejects(
      { ...rateLimited(at(1)), retry: { directive: 'never', not_before: at(1), max_attempts_remaining: 1 } },
      'retry.directive',
    );
    rejects({ ...invalidRecipient(), commit_state: 'unknown' }, 'retry.directive');
    rejects({ ...invalidRecipient(), retry: { directive: 'never', max_attempts_remaining: 1 } }, 'retry.directive');
    rejects({ ...invalidRecipient(), commit_state: 'committed' }, 'commit_state');
    rejects({ ...success(), commit_state: 'unknown' }, 'commit_state');
  });

  it('requires the envelope to name the operation it is recorded on', () => {
    rejects({ ...outcomeUnknown(), operation_ref: 'run_81/step_5' }, 'operation_ref');
    rejects({ ...success(), operation_ref: 'other' }, 'operation_ref');
  });

  it('checks codes, vocabularies, instants and bounds', () => {
    rejects({ ...outcomeUnknown(), code: 'outcome-unknown' }, 'code');
    rejects({ ...outcomeUnknown(), code: 'A'.repeat(65) }, 'code');
    rejects({ ...outcomeUnknown(), category: 'network' }, 'category');
    rejects({ ...rateLimited('in 30 seconds') }, 'retry.not_before');
    rejects({ ...rateLimited('2026-12-02T10:00:00') }, 'retry.not_before');
    rejects(
      { ...outcomeUnknown(), retry: { directive: 'never', max_attempts_remaining: -1 } },
      'retry.max_attempts_remaining',
    );
    rejects(
      { ...outcomeUnknown(), retry: { directive: 'never', max_attempts_remaining: 1.5 } },
      'retry.max_attempts_remaining',
    );
    rejects({ ...outcomeUnknown(), agent_message: 'x'.repeat(501) }, 'agent_message');
    rejects({ ...outcomeUnknown(), extra: true }, 'extra');
    rejects({ ...success(), verification: { checked_at: 'yesterday' } }, 'verification.checked_at');
    rejects('not an object', 'envelope');
    rejects({ ...outcomeUnknown(), ok: 'false' }, 'ok');
  });

  it('treats safe_details as an allowlist of flat scalars, refused not dropped', () => {
    rejects({ ...outcomeUnknown(), safe_details: { stack: 'at x' } }, 'safe_details.stack');
    rejects({ ...outcomeUnknown(), safe_details: { field: { nested: 1 } } }, 'safe_details.field');
    rejects({ ...outcomeUnknown(), safe_details: { field: 'x'.repeat(257) } }, 'safe_details.field');
    const custom = validateEnvelope({ ...outcomeUnknown(), safe_details: { region: 'eu' } }, write, {
      ...DEFAULT_ENVELOPE_LIMITS,
      safeDetailKeys: ['region'],
    });
    expect(custom.ok).toBe(true);
  });

  it('lets a read-only tool use the smaller form', () => {
    const result = validateEnvelope(
      { ok: false, code: 'RATE_LIMITED', retry: { directive: 'after_delay', not_before: at(5) } },
      read,
    );
    expect(result).toMatchObject({
      ok: true,
      envelope: { next_action: 'wait_and_retry', commit_state: 'not_committed', operation_ref: REF },
    });
    rejects({ ok: false, code: 'RATE_LIMITED', retry: { directive: 'after_delay' } }, 'retry.not_before', read);
    rejects({ ok: false, code: 'RATE_LIMITED', retry: { directive: 'after_delay' } }, 'category', write);
  });

  it('redacts secrets from free text before anything is stored, and records it', () => {
    const result = validateEnvelope(
      {
        ...outcomeUnknown(),
        agent_message: 'upstream said Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123',
        user_message: 'card 4242 4242 4242 4242',
      },
      write,
    );
    if (!result.ok) throw new Error('expected valid');
    expect(JSON.stringify(result.envelope)).not.toMatch(/abcdefghijklmnop|4242 4242/);
    expect(result.redactions).toEqual([
      { path: 'agent_message', kind: 'bearer_token' },
      { path: 'user_message', kind: 'card_number' },
    ]);
  });
});

describe('the published JSON Schema agrees with the edge validation for writes', () => {
  const ajv = new Ajv2020({ strict: false, allErrors: false });
  addFormats(ajv);
  const check = ajv.compile(envelopeJsonSchema());

  const arbitraryEnvelope = fc.record(
    {
      ok: fc.constantFrom(false, true, 'no'),
      code: fc.constantFrom('OUTCOME_UNKNOWN', 'bad code', 'X'.repeat(70)),
      category: fc.constantFrom('validation', 'authorization', 'conflict', 'dependency', 'internal', 'other'),
      commit_state: fc.constantFrom('not_committed', 'committed', 'unknown', 'maybe'),
      retry: fc.record(
        {
          directive: fc.constantFrom('never', 'after_delay', 'after_input_fix', 'soon'),
          not_before: fc.constantFrom('2026-12-02T10:00:00Z', '2026-12-02T10:00:00.123+01:00', 'tomorrow'),
          max_attempts_remaining: fc.constantFrom(0, 1, 3, -1, 2.5),
        },
        { requiredKeys: ['directive'] },
      ),
      next_action: fc.constantFrom(
        'correct_input',
        'wait_and_retry',
        'verify_operation',
        'request_approval',
        'escalate',
        'guess',
      ),
      operation_ref: fc.constant(REF),
      safe_details: fc.oneof(
        fc.constant({}),
        fc.constant({ field: 'email' }),
        fc.constant({ secret: 'x' }),
        fc.constant({ limit: 5, field: true }),
      ),
      agent_message: fc.oneof(fc.string({ maxLength: 20 }), fc.constant('x'.repeat(600))),
      user_message: fc.string({ maxLength: 20 }),
      result: fc.constant({ id: 1 }),
      verification: fc.oneof(fc.constant({ checked_at: '2026-12-02T10:00:00Z' }), fc.constant({ checked_at: 'now' })),
    },
    { requiredKeys: [] },
  );

  it('accepts and refuses the same envelopes', () => {
    fc.assert(
      fc.property(arbitraryEnvelope, (envelope) => {
        const ours = validateEnvelope(envelope, write).ok;
        const schema = check(envelope);
        expect({ envelope, schema }).toEqual({ envelope, schema: ours });
      }),
      { numRuns: 3000, seed: 99 },
    );
  });
});
