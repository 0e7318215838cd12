/**
 * Operations brought to each state a person may have to act on, over the public API of a running
 * service: the fixtures of the triage, console and webhook tests.
 */
import { fact, request } from './http';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';

export function incidentsAt(baseUrl: string, key: string) {
  async function submit(
    ref: string,
    type: string,
    data: Record<string, unknown>,
    allow: number[] = [200],
  ): Promise<{ status: number; body: any }> {
    const answer = await request(
      baseUrl,
      'POST',
      `/v1/operations/${encodeURIComponent(ref)}/events`,
      { events: [fact(type, data)] },
      { authorization: `Bearer ${key}` },
    );
    if (!allow.includes(answer.status))
      throw new Error(`${type} on ${ref}: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer;
  }
  async function dispatched(
    ref: string,
    runId: string,
    tool: string,
    policy: Record<string, unknown> = {},
  ): Promise<number> {
    await submit(ref, 'StepPlanned', {
      run_id: runId,
      tool,
      side_effect: 'write',
      input_hash: `sha256:${ref}`,
      policy,
    });
    return (await submit(ref, 'AttemptDispatched', { attempt: 1, input_hash: `sha256:${ref}` })).body.position;
  }
  async function answered(
    ref: string,
    runId: string,
    tool: string,
    envelope: unknown,
    policy: Record<string, unknown> = {},
  ): Promise<number> {
    await dispatched(ref, runId, tool, policy);
    return (await submit(ref, 'EnvelopeRecorded', { attempt: 1, envelope })).body.position;
  }
  return {
    submit,
    dispatched,
    /** The tool said it must not go on (next_action escalate). */
    escalated: (ref: string, runId: string, tool: string) => answered(ref, runId, tool, seedEnvelopes.alreadyPaid(ref)),
    awaitingApproval: (ref: string, runId: string, tool: string) =>
      answered(ref, runId, tool, seedEnvelopes.missingApproval(ref)),
    /** The outcome is unknown: the step waits on a lookup. */
    verifying: (ref: string, runId: string, tool: string, policy: Record<string, unknown> = {}) =>
      answered(ref, runId, tool, seedEnvelopes.outcomeUnknown(ref), policy),
    succeeded: (ref: string, runId: string, tool: string) =>
      answered(ref, runId, tool, seedEnvelopes.success(ref, `ev_${ref}`)),
    /** A lookup that found nothing inside the consistency window: refused as VERIFICATION_PREMATURE. */
    prematureLookup: (ref: string) =>
      submit(ref, 'VerificationRecorded', { outcome: 'not_found', checked_at: new Date().toISOString() }, [409]),
  };
}
