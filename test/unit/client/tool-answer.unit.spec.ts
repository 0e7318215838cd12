/**
 * What a model reads from a tool whose arguments hold no operation_ref (the agent-framework
 * integrations, docs/integrations.md "The operation_ref rule"): every sentence is something such a
 * tool's caller can do, and a refused field is named.
 */
import type { NextAction, ToolEnvelope } from '@recovery-ledger/core/envelope';
import {
  checked,
  correctInput,
  forStepTool,
  modelText,
  normalizeHttpResponse,
  refReusedEnvelope,
  type ToolError,
} from '@recovery-ledger/client';

const REF = 'run-1/create_invoice/s.1';

/** A provider's 400 naming amount_cents, normalized as callHttpTool does. */
function providerRefusal(): ToolEnvelope {
  return normalizeHttpResponse(
    { status: 400, body: { error: { code: 'invalid_amount', field: 'amount_cents' } } },
    {
      operationRef: REF,
      sideEffect: 'write',
      now: new Date(),
      inputFields: ['customer_id', 'amount_cents', 'currency'],
    },
  );
}

describe('a step tool: what the model reads', () => {
  it("after a provider's 400 names the invalid field and says the corrected call continues the step, not to send a ref", () => {
    const text = modelText('create_invoice', providerRefusal(), { stepTool: true });
    const [line, json] = text.split('\n');
    expect(line).toContain('field=amount_cents');
    expect(line).toContain('Call the tool again with corrected input: that call continues this same operation');
    expect(text).not.toMatch(/same operation_ref/);
    expect(JSON.parse(json)).toMatchObject({ next_action: 'correct_input', field: 'amount_cents' });
  });

  it.each<NextAction>(['correct_input', 'wait_and_retry', 'verify_operation', 'request_approval', 'escalate'])(
    'never asks for an operation_ref argument or a verify_operation tool it does not have (%s)',
    (action) => {
      const base = correctInput(
        { operationRef: REF, sideEffect: 'write', now: new Date() },
        'INVALID_INPUT',
        undefined,
      );
      const envelope = { ...base, next_action: action } as ToolError;
      const message = (forStepTool(envelope) as ToolError).agent_message;
      expect(message).not.toMatch(/same operation_ref|call verify_operation/);
    },
  );

  it('a ref that belongs to another operation goes to a person: nothing the model can correct, no field to send', () => {
    const envelope = forStepTool(refReusedEnvelope(REF)) as ToolError;
    expect(checked(envelope)).toEqual(envelope);
    expect(envelope).toMatchObject({
      code: 'OPERATION_REF_REUSED',
      next_action: 'escalate',
      retry: { directive: 'never', max_attempts_remaining: 0 },
    });
    const text = modelText('create_invoice', refReusedEnvelope(REF), { stepTool: true });
    expect(text).not.toContain('field=operation_ref');
    expect(text).not.toContain('corrected input');
    expect(text).toContain('Stop and tell the user');
  });
});
