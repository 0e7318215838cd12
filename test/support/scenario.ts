/**
 * Helpers for the end-to-end suites (test/e2e/core-*.e2e.spec.ts): a runtime's view of one
 * operation over real HTTP, the contract's envelopes addressed to any operation_ref, typed checks of
 * problem answers, and a read-only look at the events table the server writes. Nothing here
 * stands in for a part of the ledger: every request goes to the built server over loopback.
 */
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { ERROR_REGISTRY } from '@recovery-ledger/core';
import type { StoredEvent } from '../../src/store/event-store.port';
import { fact, ledgerAt, type HttpAnswer } from './http';
import { setTimeout as sleep } from 'node:timers/promises';

export type Ledger = ReturnType<typeof ledgerAt>;

export const PROBLEM = 'application/problem+json';
export const INPUT_1 = 'sha256:input-1';
export const INPUT_2 = 'sha256:input-2';

/** Waits until the wall clock (which is also the server's: same machine) is past `instant`. */
export async function waitUntilPast(instant: string, marginMs = 50): Promise<void> {
  const wait = Date.parse(instant) + marginMs - Date.now();
  if (wait > 0) await sleep(wait);
}

export const inMs = (ms: number) => new Date(Date.now() + ms).toISOString();

/** A unique operation_ref per test, so tests on one server never see each other's streams. */
export const uniqueRef = (label: string) => `run_${randomUUID().slice(0, 8)}/${label}`;

// ---- answers -------------------------------------------------------------------------------------

function describeAnswer(answer: HttpAnswer): string {
  return `${answer.status} ${answer.contentType} ${JSON.stringify(answer.body)}`;
}

/** A 200 answer's body; anything else fails with the whole answer in the message. */
export function ok<T = any>(answer: HttpAnswer<T>): T {
  if (answer.status !== 200) throw new Error(`expected 200, got ${describeAnswer(answer)}`);
  return answer.body;
}

/** A problem answer with the given status and stable code; answers its body. */
export function problem(answer: HttpAnswer, status: number, code: string): any {
  if (answer.status !== status || answer.body?.code !== code) {
    throw new Error(`expected ${status} ${code}, got ${describeAnswer(answer)}`);
  }
  expect(answer.contentType.startsWith(PROBLEM)).toBe(true);
  expect(Object.keys(ERROR_REGISTRY)).toContain(code);
  return answer.body;
}

// ---- one operation, as a runtime drives it ------------------------------------------------------

export interface PlanOptions {
  side_effect?: 'read' | 'write';
  input_hash?: string;
  tool?: string;
  policy?: Record<string, unknown>;
}

export function operation(api: Ledger, ref: string) {
  const run_id = ref.split('/')[0] || 'run';
  return {
    ref,
    plan: (options: PlanOptions = {}, eventId?: string) =>
      api.submit(ref, [
        fact(
          'StepPlanned',
          {
            run_id,
            tool: options.tool ?? 'create_invoice',
            side_effect: options.side_effect ?? 'write',
            input_hash: options.input_hash ?? INPUT_1,
            ...(options.policy ? { policy: options.policy } : {}),
          },
          eventId,
        ),
      ]),
    dispatch: (attempt: number, input_hash = INPUT_1, eventId?: string, expectedRevision?: number) =>
      api.submit(ref, [fact('AttemptDispatched', { attempt, input_hash }, eventId)], expectedRevision),
    record: (attempt: number, envelope: unknown, eventId?: string) =>
      api.submit(ref, [fact('EnvelopeRecorded', { attempt, envelope }, eventId)]),
    verify: (
      outcome: 'found_committed' | 'not_found' | 'lookup_unavailable',
      extra: Record<string, unknown> = {},
      eventId?: string,
    ) =>
      api.submit(ref, [
        fact('VerificationRecorded', { outcome, checked_at: new Date().toISOString(), ...extra }, eventId),
      ]),
    approve: (decision: 'granted' | 'denied', eventId?: string) =>
      api.submit(ref, [fact('ApprovalRecorded', { decision, approver: 'ops@example.com' }, eventId)]),
    state: () => api.state(ref),
    events: async (): Promise<
      Array<{ revision: number; type: string; event_id: string; data: any; causation_event_id?: string }>
    > => ok(await api.events(ref)).events,
  };
}

// ---- the contract's envelopes, for any operation_ref --------------------------------------------------

export const envelopes = {
  ...seedEnvelopes,
  success: (ref: string, result: unknown = { invoice_id: 'inv_123' }) =>
    seedEnvelopes.success(ref, 'inv_123', undefined, result),
  /** A read-only tool's smaller form (docs/contract.md §2): a stable code and a retry direction. */
  readRateLimited: (notBefore: string, remaining = 2) => ({
    ok: false,
    code: 'RATE_LIMITED',
    retry: { directive: 'after_delay', not_before: notBefore, max_attempts_remaining: remaining },
  }),
  outage: (ref: string, notBefore: string, remaining = 5) => ({
    ...seedEnvelopes.rateLimited(ref, notBefore, remaining),
    code: 'PROVIDER_UNAVAILABLE',
    safe_details: { retry_after: 0 },
    agent_message: 'The provider is unavailable; nothing was sent.',
    user_message: 'The provider is unavailable right now.',
  }),
};

// ---- the events table, read as an auditor would ---------------------------------------------------

export interface EventRow {
  position: number;
  stream: string;
  revision: number;
  event_id: string;
  type: string;
  data: string;
  metadata: string;
}

export const eventsFile = (dataDir: string) => join(dataDir, 'events.sqlite');

/** Every row of the events table, in log order, read through a read-only connection. */
export function readEventRows(dataDir: string): EventRow[] {
  const db = new Database(eventsFile(dataDir), { readonly: true, fileMustExist: true });
  try {
    return db
      .prepare('SELECT position, stream, revision, event_id, type, data, metadata FROM events ORDER BY position')
      .all() as EventRow[];
  } finally {
    db.close();
  }
}

/** The table as one string: equal dumps mean byte-for-byte equal rows. */
export const dumpEvents = (dataDir: string) => JSON.stringify(readEventRows(dataDir));

export function toStoredEvent(row: EventRow): StoredEvent {
  return {
    stream: row.stream,
    revision: row.revision,
    position: row.position,
    event_id: row.event_id,
    type: row.type,
    data: JSON.parse(row.data),
    metadata: JSON.parse(row.metadata),
  };
}

/** Rows grouped by stream, each stream in revision order. */
export function streamsOf(rows: EventRow[]): Map<string, StoredEvent[]> {
  const streams = new Map<string, StoredEvent[]>();
  for (const row of rows) {
    const list = streams.get(row.stream) ?? [];
    list.push(toStoredEvent(row));
    streams.set(row.stream, list);
  }
  for (const list of streams.values()) list.sort((a, b) => a.revision - b.revision);
  return streams;
}

/** A decision's refusal: the problem answer also carries the directive and the state (docs/contract.md §9). */
export function refusal(answer: HttpAnswer, code: string): any {
  const body = problem(answer, 409, code);
  expect(body.directive).toEqual(
    expect.objectContaining({ next_action: expect.any(String), attempts_remaining: expect.any(Number) }),
  );
  expect(body.state).toEqual(expect.objectContaining({ status: expect.any(String), revision: expect.any(Number) }));
  return body;
}
