import {
  containsSecret,
  LedgerProblem,
  type SecretDetector,
  type SubmitContext,
  type SubmitRequest,
} from '@recovery-ledger/core';

/**
 * The identifier fields of a submit: stored verbatim (stream names, indexes, projections, the
 * page) and never redacted, because a redacted identifier would name another operation or tool.
 * Their grammar is checked at the edge (docs/security.md, "Identifiers"); here, one that a secret
 * detector flags is refused whole.
 */
export function identifierFields(
  context: SubmitContext,
  request: SubmitRequest,
): Array<[field: string, value: unknown]> {
  const fields: Array<[string, unknown]> = [['operation_ref', context.operationRef]];
  if (context.tracestate !== undefined) fields.push(['tracestate', context.tracestate]);
  request.events.forEach((event, index) => {
    const data = event.data as Record<string, any>;
    const at = `events[${index}].data`;
    for (const name of ['run_id', 'tool', 'input_hash']) fields.push([`${at}.${name}`, data[name]]);
    fields.push([`${at}.policy.verification_tool`, data.policy?.verification_tool]);
    const envelope = data.envelope;
    if (envelope !== null && typeof envelope === 'object' && !Array.isArray(envelope)) {
      fields.push([`${at}.envelope.code`, envelope.code], [`${at}.envelope.operation_ref`, envelope.operation_ref]);
      const details = envelope.safe_details;
      if (details !== null && typeof details === 'object')
        fields.push([`${at}.envelope.safe_details.verification_tool`, details.verification_tool]);
    }
  });
  return fields;
}

/** 422 SECRET_IN_IDENTIFIER naming the first flagged field; its value is never echoed. */
export function refuseSecretIdentifiers(context: SubmitContext, request: SubmitRequest, detect: SecretDetector): void {
  for (const [field, value] of identifierFields(context, request)) {
    if (typeof value === 'string' && containsSecret(value, { detect })) {
      throw new LedgerProblem(
        'SECRET_IN_IDENTIFIER',
        `${field} looks like a credential; identifiers are stored as sent, so it is refused`,
        { field },
      );
    }
  }
}
