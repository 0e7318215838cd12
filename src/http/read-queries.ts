import { LedgerProblem, STEP_STATUSES, type StepStatus } from '@recovery-ledger/core';
import {
  decodeCursor,
  RECOVERY_STATUSES,
  TRIAGE_KINDS,
  TRUST_FLAGS,
  type EvidenceQuery,
  type ReadPosition,
  type RecoveryQuery,
  type RunListQuery,
  type RunQuery,
  type StepListQuery,
  type TriageQuery,
  type TrustQuery,
} from '@recovery-ledger/projections';
import type { ChangesQuery } from '../projection-engine/projection-queries';
import { checkOperationRef, optionalInteger } from './operation-ref';

/**
 * The read side's query strings, checked at the edge like the write side's bodies: each parser
 * turns the raw parameters into the typed query its service takes, or refuses with a 400
 * BAD_REQUEST naming the parameter. The services below never see a string they must parse.
 */
export type QueryParams = Record<string, string | string[] | undefined>;

const MAX_AGE_MS = 10 * 365 * 86_400_000;
const MAX_THRESHOLD_MS = 30 * 86_400_000;
/** run_id, tool, reason and search text in a query: any 1 to 200 characters but control characters, not only spaces. */
// eslint-disable-next-line no-control-regex -- control characters are exactly what an identifier may not hold
const QUERY_IDENTIFIER_PATTERN = /^[^\u0000-\u001f\u007f]{1,200}$/u;

export function single(params: QueryParams, name: string): string | undefined {
  const value = params[name];
  if (Array.isArray(value)) throw new LedgerProblem('BAD_REQUEST', `${name} may be given once`, { field: name });
  return value;
}

function identifier(raw: string | undefined, field: string): string | undefined {
  if (raw === undefined) return undefined;
  if (!QUERY_IDENTIFIER_PATTERN.test(raw) || raw.trim().length === 0) {
    throw new LedgerProblem('BAD_REQUEST', `${field} must be 1 to 200 printable characters`, { field });
  }
  return raw;
}

function oneOf<T extends string>(raw: string | undefined, allowed: readonly T[], field: string): T | undefined {
  if (raw === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new LedgerProblem('BAD_REQUEST', `${field} must be one of ${allowed.join(', ')}`, { field });
  }
  return raw as T;
}

export function pageLimit(params: QueryParams, fallback: number, max: number): number {
  return optionalInteger(single(params, 'limit'), 'limit', 1, max) ?? fallback;
}

function integer(params: QueryParams, name: string, min: number, max: number): number | undefined {
  return optionalInteger(single(params, name), name, min, max);
}

/** `older_than_ms`: judged later by the ledger's clock, never the client's (docs/contract.md §4). */
function olderThan(params: QueryParams): number | undefined {
  return integer(params, 'older_than_ms', 0, MAX_AGE_MS);
}

/** `wait_for_position` and `wait_timeout_ms`: read-your-writes, up to the service's longest wait. */
function readPosition(params: QueryParams, maxWaitMs: number): ReadPosition {
  const waitForPosition = integer(params, 'wait_for_position', 0, Number.MAX_SAFE_INTEGER);
  const waitTimeoutMs = integer(params, 'wait_timeout_ms', 0, maxWaitMs);
  return {
    ...(waitForPosition === undefined ? {} : { waitForPosition }),
    ...(waitTimeoutMs === undefined ? {} : { waitTimeoutMs }),
  };
}

/** A keyset cursor of `(instant, key)`, as the lists ordered by time hand out. */
function timeKeyCursor(params: QueryParams): [number, string] | undefined {
  return decodeCursor(single(params, 'cursor'), ['number', 'string']) as [number, string] | undefined;
}

export function evidenceQuery(ref: string, params: QueryParams, maxWaitMs: number): EvidenceQuery {
  const operationRef = checkOperationRef(ref);
  const limit = pageLimit(params, 500, 1000);
  const [afterRevision] = (decodeCursor(single(params, 'cursor'), ['number']) ?? [-1]) as number[];
  return { operationRef, limit, afterRevision, ...readPosition(params, maxWaitMs) };
}

export function runQuery(runIdRaw: string, params: QueryParams, maxWaitMs: number): RunQuery {
  const runId = identifier(runIdRaw, 'run_id') as string;
  const status = oneOf(single(params, 'status'), ['unplanned', ...STEP_STATUSES] as const, 'status');
  const tool = identifier(single(params, 'tool'), 'tool');
  const limit = pageLimit(params, 500, 1000);
  const [afterPlanned] = (decodeCursor(single(params, 'cursor'), ['number']) ?? [0]) as number[];
  return { runId, status, tool, limit, afterPlanned, ...readPosition(params, maxWaitMs) };
}

export function recoveryQuery(params: QueryParams, maxWaitMs: number): RecoveryQuery {
  const olderThanMs = olderThan(params);
  const tool = identifier(single(params, 'tool'), 'tool');
  const runId = identifier(single(params, 'run_id'), 'run_id');
  const status = oneOf(single(params, 'status'), RECOVERY_STATUSES, 'status');
  const limit = pageLimit(params, 100, 1000);
  const cursor = timeKeyCursor(params);
  return { olderThanMs, tool, runId, status, limit, cursor, ...readPosition(params, maxWaitMs) };
}

export function operationListQuery(params: QueryParams, maxWaitMs: number): StepListQuery {
  const olderThanMs = olderThan(params);
  const tool = identifier(single(params, 'tool'), 'tool');
  const runId = identifier(single(params, 'run_id'), 'run_id');
  const status = oneOf(single(params, 'status'), STEP_STATUSES as readonly StepStatus[], 'status');
  const limit = pageLimit(params, 100, 1000);
  const cursor = timeKeyCursor(params);
  const position = readPosition(params, maxWaitMs);
  const refContains = identifier(single(params, 'q'), 'q');
  const has = oneOf(single(params, 'has'), TRUST_FLAGS, 'has');
  const newest = oneOf(single(params, 'order'), ['oldest', 'newest'] as const, 'order') === 'newest';
  return { olderThanMs, tool, runId, status, limit, cursor, ...position, refContains, has, newest };
}

export function triageQuery(params: QueryParams, maxWaitMs: number): TriageQuery {
  const kind = oneOf(single(params, 'kind'), TRIAGE_KINDS, 'kind');
  const tool = identifier(single(params, 'tool'), 'tool');
  const runId = identifier(single(params, 'run_id'), 'run_id');
  const reason = identifier(single(params, 'reason'), 'reason');
  const refContains = identifier(single(params, 'q'), 'q');
  const olderThanMs = olderThan(params);
  const dispatchTimeoutMs = integer(params, 'dispatch_timeout_ms', 0, MAX_THRESHOLD_MS);
  const unknownAfterMs = integer(params, 'unknown_after_ms', 0, MAX_THRESHOLD_MS);
  const retryGraceMs = integer(params, 'retry_grace_ms', 0, MAX_THRESHOLD_MS);
  const inputAfterMs = integer(params, 'input_after_ms', 0, MAX_THRESHOLD_MS);
  const limit = pageLimit(params, 50, 500);
  const cursor = timeKeyCursor(params);
  return {
    kind,
    tool,
    runId,
    reason,
    refContains,
    olderThanMs,
    dispatchTimeoutMs,
    unknownAfterMs,
    retryGraceMs,
    inputAfterMs,
    limit,
    cursor,
    ...readPosition(params, maxWaitMs),
  };
}

export function runListQuery(params: QueryParams, maxWaitMs: number): RunListQuery {
  const refContains = identifier(single(params, 'q'), 'q');
  const openOnly = oneOf(single(params, 'open'), ['true', 'false'] as const, 'open') === 'true';
  const limit = pageLimit(params, 50, 500);
  const cursor = timeKeyCursor(params);
  return { refContains, openOnly, limit, cursor, ...readPosition(params, maxWaitMs) };
}

export function changesQuery(params: QueryParams, maxWaitMs: number): ChangesQuery {
  const after = integer(params, 'after', 0, Number.MAX_SAFE_INTEGER) ?? 0;
  const waitMs = integer(params, 'wait_ms', 0, maxWaitMs) ?? 0;
  return { after, waitMs };
}

export function trustQuery(params: QueryParams, maxWaitMs: number): TrustQuery {
  const tool = identifier(single(params, 'tool'), 'tool');
  const limit = pageLimit(params, 100, 1000);
  const [afterTool] = (decodeCursor(single(params, 'cursor'), ['string']) ?? []) as string[];
  return { tool, limit, afterTool, ...readPosition(params, maxWaitMs) };
}
