import { LedgerProblem } from '@recovery-ledger/core';
import { encodeCursor } from '@recovery-ledger/projections';
import { evidenceQuery, operationListQuery, recoveryQuery, triageQuery } from '../../../src/http/read-queries';
import { leaseHeader, releaseRequest, renewRequest, workRequest } from '../../../src/http/work-requests';
import { DEFAULT_WORK_FEED_SETTINGS } from '../../../src/work/work-feed';

/** The read side's edge: a query string becomes the typed query its service takes, or a 400 naming the parameter. */
function refusal(run: () => unknown): { code: string; field?: string; message: string } {
  try {
    run();
  } catch (error) {
    if (error instanceof LedgerProblem) return { code: error.code, field: error.extras.field, message: error.detail };
    throw error;
  }
  throw new Error('accepted');
}

describe('read queries are parsed at the HTTP edge into typed queries', () => {
  it('defaults and bounds a page, decodes its cursor and brings the ref to NFC', () => {
    expect(evidenceQuery('run_1/caf\u0065\u0301', {}, 30_000)).toEqual({
      operationRef: 'run_1/caf\u00e9',
      limit: 500,
      afterRevision: -1,
    });
    expect(
      evidenceQuery('r', { cursor: encodeCursor([4]), wait_for_position: '9', wait_timeout_ms: '100' }, 30_000),
    ).toEqual({
      operationRef: 'r',
      limit: 500,
      afterRevision: 4,
      waitForPosition: 9,
      waitTimeoutMs: 100,
    });
    expect(
      operationListQuery(
        { status: 'verifying', order: 'newest', has: 'unknown_outcomes', q: 'inv', limit: '7' },
        30_000,
      ),
    ).toEqual({
      status: 'verifying',
      newest: true,
      has: 'unknown_outcomes',
      refContains: 'inv',
      limit: 7,
    });
    expect(triageQuery({ unknown_after_ms: '60000', cursor: encodeCursor([1, 'a']) }, 30_000)).toMatchObject({
      unknownAfterMs: 60_000,
      limit: 50,
      cursor: [1, 'a'],
    });
  });

  it('refuses bad input with the code, field and message the API documents', () => {
    expect(refusal(() => operationListQuery({ limit: ['1', '2'] }, 30_000))).toEqual({
      code: 'BAD_REQUEST',
      field: 'limit',
      message: 'limit may be given once',
    });
    expect(refusal(() => recoveryQuery({ status: 'planned' }, 30_000))).toEqual({
      code: 'BAD_REQUEST',
      field: 'status',
      message: 'status must be one of dispatched, verifying',
    });
    expect(refusal(() => recoveryQuery({ wait_timeout_ms: '30001' }, 30_000))).toEqual({
      code: 'BAD_REQUEST',
      field: 'wait_timeout_ms',
      message: 'wait_timeout_ms must be an integer from 0 to 30000',
    });
    expect(refusal(() => triageQuery({ tool: '\u0007' }, 30_000))).toMatchObject({ field: 'tool' });
    expect(refusal(() => evidenceQuery('r', { cursor: 'not-a-cursor' }, 30_000))).toMatchObject({ field: 'cursor' });
  });

  it('checks the work feed asks, the lease bodies and the Ledger-Lease header', () => {
    const caller = { tenant: 't', actor: 'key_1', role: 'runtime' as const };
    expect(workRequest(caller, { tool: ['a', 'b'] }, DEFAULT_WORK_FEED_SETTINGS)).toEqual({
      tools: ['a', 'b'],
      worker: 'key_1',
      limit: 10,
      waitMs: 0,
      leaseMs: 30_000,
    });
    expect(refusal(() => workRequest(caller, { lease_ms: '999' }, DEFAULT_WORK_FEED_SETTINGS))).toMatchObject({
      field: 'lease_ms',
    });
    expect(refusal(() => releaseRequest({ lease_id: '00000000-0000-4000-8000-000000000000', extra: 1 }))).toEqual({
      code: 'BAD_REQUEST',
      field: 'extra',
      message: 'extra should not exist',
    });
    expect(leaseHeader('')).toBeUndefined();
    expect(refusal(() => leaseHeader('nope'))).toMatchObject({ field: 'ledger-lease' });
  });
});

describe('the lease bodies, read against their schemas', () => {
  const ID = '0F0E0D0C-0000-4000-8000-000000000000';

  it('take the lease id as sent and a bounded integer beside it', () => {
    expect(releaseRequest({ lease_id: ID, hold_ms: 0 })).toEqual({ leaseId: ID, holdMs: 0 });
    expect(renewRequest({ lease_id: ID }, DEFAULT_WORK_FEED_SETTINGS)).toEqual({ leaseId: ID });
  });

  it.each([
    ['no object', [], { field: 'body', message: 'the body must be a JSON object' }],
    ['an unknown key first', { lease_ms: 'x', other: 1 }, { field: 'other', message: 'other should not exist' }],
    ['no lease id', { lease_ms: 2000 }, { field: 'lease_id', message: 'lease_id must be a lease id (a UUID)' }],
    [
      'a lease id that is no UUID',
      { lease_id: 'abc' },
      { field: 'lease_id', message: 'lease_id must be a lease id (a UUID)' },
    ],
    [
      'a length under its bound',
      { lease_id: ID, lease_ms: 999 },
      {
        field: 'lease_ms',
        message: `lease_ms must be an integer from 1000 to ${DEFAULT_WORK_FEED_SETTINGS.maxLeaseMs}`,
      },
    ],
    [
      'a length that is no integer',
      { lease_id: ID, lease_ms: null },
      {
        field: 'lease_ms',
        message: `lease_ms must be an integer from 1000 to ${DEFAULT_WORK_FEED_SETTINGS.maxLeaseMs}`,
      },
    ],
  ])('a renewal with %s is refused, naming the field', (_case, body, expected) => {
    expect(refusal(() => renewRequest(body, DEFAULT_WORK_FEED_SETTINGS))).toEqual({ code: 'BAD_REQUEST', ...expected });
  });

  it('a hold over a day is refused', () => {
    expect(refusal(() => releaseRequest({ lease_id: ID, hold_ms: 86_400_001 }))).toEqual({
      code: 'BAD_REQUEST',
      field: 'hold_ms',
      message: 'hold_ms must be an integer from 0 to 86400000',
    });
  });
});
