import type { Caller } from '../auth/caller';
import { IDENTIFIER_PATTERN, LedgerProblem } from '@recovery-ledger/core';
import { holdsSecret } from '../ledger/secret-scanner';
import type { ReleaseRequest, RenewRequest, WorkFeedSettings, WorkRequest } from '../work/work-feed';
import { checkOperationRef, optionalInteger } from './operation-ref';
import { single, type QueryParams } from './read-queries';
import { integerSchema, readFieldsAgainstSchema, type FieldSchema } from './submit-body.reader';

/**
 * The work feed's query strings, bodies and the `Ledger-Lease` header, checked at the edge: each
 * turns into the typed request the feed takes, or a 400 BAD_REQUEST naming the field.
 */

/** A tool name in a feed's filter: 1 to 200 printable ASCII characters, no space (worker names have the identifier grammar). */
const WORK_IDENTIFIER_PATTERN = /^[\x21-\x7e]{1,200}$/;
const LEASE_ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_HOLD_MS = 86_400_000;

function identifier(raw: unknown, field: string): string {
  if (typeof raw !== 'string' || !WORK_IDENTIFIER_PATTERN.test(raw)) {
    throw new LedgerProblem('BAD_REQUEST', `${field} must be 1 to 200 printable characters without spaces`, { field });
  }
  return raw;
}

/**
 * A worker name is stored as sent in the metadata of every fact submitted under its lease, for ever,
 * and shown as the holder: an identifier like `run_id` (docs/security.md, "Identifiers"), with its
 * grammar and length.
 */
function workerName(raw: unknown): string {
  if (typeof raw !== 'string' || raw.length > 200 || !IDENTIFIER_PATTERN.test(raw)) {
    throw new LedgerProblem(
      'BAD_REQUEST',
      'worker must be 1 to 200 ASCII letters, digits or _ . : / @ + = # ~ -, first a letter, a digit or _',
      { field: 'worker' },
    );
  }
  return raw;
}

/**
 * 422 SECRET_IN_IDENTIFIER when a worker name looks like a credential (an access key id, a token):
 * it would sit in every fact of the lease and in every answer that names the holder. The value is
 * never echoed. Checked before anything is leased.
 */
export async function refuseSecretWorker(worker: string): Promise<void> {
  if (await holdsSecret(worker)) {
    throw new LedgerProblem(
      'SECRET_IN_IDENTIFIER',
      'worker looks like a credential; a worker name is stored as sent, so it is refused',
      { field: 'worker' },
    );
  }
}

function leaseId(raw: unknown, field = 'lease_id'): string {
  if (typeof raw !== 'string' || !LEASE_ID_PATTERN.test(raw))
    throw new LedgerProblem('BAD_REQUEST', `${field} must be a lease id (a UUID)`, { field });
  return raw;
}

function bodyObject(body: unknown): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new LedgerProblem('BAD_REQUEST', 'the body must be a JSON object', { field: 'body' });
  }
  return body as Record<string, unknown>;
}

const LEASE_ID_SCHEMA: FieldSchema = {
  type: 'string',
  pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$',
  reason: 'must be a lease id (a UUID)',
};

/** A lease body: the lease id, and one bounded integer beside it. */
const leaseBodySchema = (field: string, bounds: FieldSchema): FieldSchema => ({
  type: 'object',
  unknownKeyReason: 'should not exist',
  properties: { lease_id: LEASE_ID_SCHEMA, [field]: bounds },
  required: ['lease_id'],
});

function repeated(params: QueryParams, name: string): string[] {
  const value = params[name];
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

export function workRequest(caller: Caller, params: QueryParams, settings: WorkFeedSettings): WorkRequest {
  const rawTools = repeated(params, 'tool');
  if (rawTools.length > 50) throw new LedgerProblem('BAD_REQUEST', 'at most 50 tools', { field: 'tool' });
  const tools = rawTools.map((tool) => identifier(tool, 'tool'));
  // A worker names itself; without a name its key's id is the holder.
  const named = single(params, 'worker');
  const worker = named === undefined ? caller.actor : workerName(named);
  const limit = optionalInteger(single(params, 'limit'), 'limit', 1, settings.maxLimit) ?? 10;
  const waitMs = optionalInteger(single(params, 'wait_ms'), 'wait_ms', 0, settings.maxWaitMs) ?? 0;
  const leaseMs =
    optionalInteger(single(params, 'lease_ms'), 'lease_ms', 1000, settings.maxLeaseMs) ?? settings.defaultLeaseMs;
  return { tools, worker, limit, waitMs, leaseMs };
}

export function renewRequest(rawBody: unknown, settings: WorkFeedSettings): RenewRequest {
  const body = bodyObject(rawBody);
  readFieldsAgainstSchema(leaseBodySchema('lease_ms', integerSchema(1000, settings.maxLeaseMs)), body);
  const leaseMs = body.lease_ms as number | undefined;
  return { leaseId: body.lease_id as string, ...(leaseMs === undefined ? {} : { leaseMs }) };
}

const RELEASE_SCHEMA = leaseBodySchema('hold_ms', integerSchema(0, MAX_HOLD_MS));

export function releaseRequest(rawBody: unknown): ReleaseRequest {
  const body = bodyObject(rawBody);
  readFieldsAgainstSchema(RELEASE_SCHEMA, body);
  const holdMs = body.hold_ms as number | undefined;
  return { leaseId: body.lease_id as string, ...(holdMs === undefined ? {} : { holdMs }) };
}

/** The operation_refs of a lease listing: repeated, up to 100. */
export function leaseListRefs(params: QueryParams): string[] {
  const raw = repeated(params, 'operation_ref');
  if (raw.length > 100)
    throw new LedgerProblem('BAD_REQUEST', 'operation_ref may be given at most 100 times', { field: 'operation_ref' });
  return raw.map((ref) => checkOperationRef(ref));
}

/** The `Ledger-Lease` header of a submit: absent or empty means no lease. */
export function leaseHeader(header: string | undefined): string | undefined {
  if (header === undefined || header === '') return undefined;
  return leaseId(header.trim(), 'ledger-lease');
}
