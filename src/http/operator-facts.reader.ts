import {
  LedgerProblem,
  MAX_OPERATIONS_PER_REQUEST,
  OPERATOR_FACTS_BODY_SCHEMA,
  type OperatorFactsRequest,
} from '@recovery-ledger/core';
import { checkOperationRef } from './operation-ref';
import { readAgainstSchema, readFactData, type FieldSchema } from './submit-body.reader';

/**
 * The body of `POST /v1/operator-facts` (docs/contract.md §9), read whole before any operation is
 * decided: a list over the bound is 413 TOO_MANY_OPERATIONS; any other fault of the request (its
 * shape, the fact's data, a ref outside the grammar, a ref or an event id named twice) is a 400
 * naming the field, and nothing of the request is decided.
 */
export function readOperatorFactsBody(body: unknown): OperatorFactsRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new LedgerProblem('BAD_REQUEST', 'the body must be a JSON object', { field: 'body' });
  }
  const listed = (body as { operations?: unknown }).operations;
  if (Array.isArray(listed) && listed.length > MAX_OPERATIONS_PER_REQUEST) {
    throw new LedgerProblem(
      'TOO_MANY_OPERATIONS',
      `at most ${MAX_OPERATIONS_PER_REQUEST} operations per request (this one names ${listed.length}): send the rest in another request`,
      { field: 'operations' },
    );
  }
  readAgainstSchema(OPERATOR_FACTS_BODY_SCHEMA as FieldSchema, body);
  const { fact, operations } = body as OperatorFactsRequest;
  readFactData(fact.type, fact.data, 'fact.data');
  const refs = new Set<string>();
  const ids = new Set<string>();
  return {
    fact: { type: fact.type, data: fact.data },
    operations: operations.map(({ operation_ref, event_id }, index) => {
      const at = `operations[${index}]`;
      const ref = refAt(operation_ref, `${at}.operation_ref`);
      // One decision per operation: the same one twice would be decided on what the first just did.
      if (refs.has(ref))
        throw new LedgerProblem('BAD_REQUEST', `${at}.operation_ref names an operation already in the list`, {
          field: `${at}.operation_ref`,
        });
      // UUIDs compare case-insensitively; the ledger stores them lower-case.
      const eventId = event_id.toLowerCase();
      if (ids.has(eventId))
        throw new LedgerProblem('BAD_REQUEST', `${at}.event_id is already used in the list: one per operation`, {
          field: `${at}.event_id`,
        });
      refs.add(ref);
      ids.add(eventId);
      return { operation_ref: ref, event_id: eventId };
    }),
  };
}

/** The ref's grammar is the single route's (./operation-ref.ts), named by its place in the list. */
function refAt(ref: string, field: string): string {
  try {
    return checkOperationRef(ref);
  } catch (error) {
    if (!(error instanceof LedgerProblem)) throw error;
    throw new LedgerProblem(error.code, error.detail.replace(/^operation_ref/, field), { field });
  }
}
