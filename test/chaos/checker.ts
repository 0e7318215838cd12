/**
 * After a campaign: what the clients were told, held against what is on disk.
 *
 * The log is read straight from the SQLite file with a read-only connection (or, on PostgreSQL,
 * from `ledger_events` on a connection of the checker's own: postgres-log.ts), never through the
 * service, so none of the service's own bookkeeping (its idempotency answers, its projections) can
 * vouch for itself. The domain's pure `fold` and the hash-chain function are the only product code
 * used here, as the definitions of "the state of a stream" and "an intact chain"; the trust metrics
 * are counted again with SQL (trust-count.ts) and the projections are rebuilt from zero.
 */
import Database from 'better-sqlite3';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { canonicalJson, fold } from '@recovery-ledger/core';
import { stateView } from '../../src/ledger/step-views';
import { toRecorded } from '../../src/ledger/stored-events';
import { ProjectionEngine } from '../../src/projection-engine/projection-engine';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { trustReport, type TrustMetricsDoc } from '@recovery-ledger/projections';
import type { EventStore, StoredEvent } from '../../src/store/event-store.port';
import { verifyChain } from '../../src/integrity/hash-chain';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { compareTrust, countTrust, sqliteTrustSql, type TrustCountResult } from './trust-count';
import type { AckRecord, LoadRecord, RefusalRecord, ToolWriteRecord } from './records';
import type { EventRow } from '../support/scenario';

/** Refusals of a dispatch that are recorded as DispatchRefused (docs/contract.md §3: the evidence of the gate). */
const RECORDED_DISPATCH_REFUSALS = new Set([
  'ATTEMPT_IN_FLIGHT',
  'VERIFY_BEFORE_RETRY',
  'UNCHANGED_RETRY',
  'RETRY_NOT_BEFORE',
  'APPROVAL_REQUIRED',
  'ATTEMPTS_EXHAUSTED',
  'STEP_ESCALATED',
  'ATTEMPT_MISMATCH',
]);
/** States a dispatch may be granted from (docs/contract.md §4): never while in flight, verifying, waiting on approval, or terminal. */
const DISPATCHABLE_FROM = new Set(['planned', 'retry_ready', 'needs_input', 'retry_scheduled']);
const TERMINAL = new Set(['succeeded', 'escalated']);

export type CheckName =
  | 'acknowledged_in_log'
  | 'ack_answer_matches_log'
  | 'refusals_recorded'
  | 'unique_event_ids'
  | 'contiguous_revisions'
  | 'hash_chain'
  | 'state_machine'
  | 'tool_writes'
  | 'served_state_equals_fold'
  | 'projections_served_equal_log'
  | 'trust_metrics_equal_count'
  | 'trust_read_model_equals_count'
  | 'rebuild_equals_live'
  | 'graceful_shutdown';

export interface CheckOutcome {
  /** How many things were checked. */
  checked: number;
  failures: string[];
  /** Set when the check could not run at all, with the reason (never silently). */
  notRun?: string;
}

export type CheckReport = Record<CheckName, CheckOutcome>;

export interface Figures {
  events: number;
  streams: number;
  facts_acknowledged: number;
  refusals_acknowledged: number;
  /**
   * Facts whose first answer never arrived (the service died, or the answer was lost) and whose
   * resend of the same id was answered `duplicate`: stored once, though sent several times.
   */
  resent_answered_duplicate: number;
  tool_writes: number;
  /** Acknowledged facts not in the log. */
  lost: number;
  /** Event ids stored more than once, plus operations the provider wrote more than once. */
  duplicated: number;
  /** Every other failed comparison. */
  mismatches: number;
}

export function emptyReport(): CheckReport {
  const outcome = (): CheckOutcome => ({ checked: 0, failures: [] });
  return {
    acknowledged_in_log: outcome(),
    ack_answer_matches_log: outcome(),
    refusals_recorded: outcome(),
    unique_event_ids: outcome(),
    contiguous_revisions: outcome(),
    hash_chain: outcome(),
    state_machine: outcome(),
    tool_writes: outcome(),
    served_state_equals_fold: outcome(),
    projections_served_equal_log: outcome(),
    trust_metrics_equal_count: outcome(),
    trust_read_model_equals_count: outcome(),
    rebuild_equals_live: outcome(),
    graceful_shutdown: outcome(),
  };
}

export function readRecords(files: readonly string[]): LoadRecord[] {
  const records: LoadRecord[] = [];
  for (const file of files) {
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (line.trim() !== '') records.push(JSON.parse(line) as LoadRecord);
    }
  }
  return records;
}

export interface RawLog {
  events: StoredEvent[];
  streams: Map<string, StoredEvent[]>;
  byId: Map<string, StoredEvent[]>;
  byCause: Map<string, StoredEvent[]>;
}

export function openLog(eventsFile: string): Database.Database {
  return new Database(eventsFile, { readonly: true, fileMustExist: true });
}

export function readRawLog(eventsFile: string): RawLog {
  const db = openLog(eventsFile);
  let rows: EventRow[];
  try {
    rows = db
      .prepare('SELECT position, stream, revision, event_id, type, data, metadata FROM events ORDER BY position')
      .all() as EventRow[];
  } finally {
    db.close();
  }
  return rawLogOf(rows);
}

/** The log's rows, in log order, decoded and indexed by stream, event id and cause. */
export function rawLogOf(rows: readonly EventRow[]): RawLog {
  const events = rows.map((row) => ({
    stream: row.stream,
    revision: row.revision,
    position: row.position,
    event_id: row.event_id,
    type: row.type,
    data: JSON.parse(row.data),
    metadata: JSON.parse(row.metadata),
  })) as StoredEvent[];
  const streams = new Map<string, StoredEvent[]>();
  const byId = new Map<string, StoredEvent[]>();
  const byCause = new Map<string, StoredEvent[]>();
  const push = (map: Map<string, StoredEvent[]>, key: string, event: StoredEvent) => {
    const list = map.get(key);
    if (list) list.push(event);
    else map.set(key, [event]);
  };
  for (const event of events) {
    push(streams, event.stream, event);
    push(byId, event.event_id, event);
    if (event.metadata.causation_event_id) push(byCause, event.metadata.causation_event_id, event);
  }
  for (const list of streams.values()) list.sort((a, b) => a.revision - b.revision);
  return { events, streams, byId, byCause };
}

/**
 * A log the checker reads on its own: the SQLite file (sqliteLog below) or PostgreSQL's
 * `ledger_events` (postgres-log.ts). Whatever the store, the checks are the same.
 */
export interface LogSource {
  /** Every event, in log order. */
  read(): Promise<RawLog>;
  /** How many events the log holds. */
  count(): Promise<number>;
  /** The highest position in the log (0 when empty). */
  head(): Promise<number>;
  /** The trust metrics counted with SQL over the raw table (trust-count.ts). */
  countTrust(tenant: string): Promise<TrustCountResult>;
  /** Every projection rebuilt from zero over this log, into a fresh SQLite read model. */
  rebuild(): Promise<RebuiltReadModel>;
}

export function sqliteLog(eventsFile: string): LogSource {
  const withLog = async <T>(use: (db: Database.Database) => T | Promise<T>): Promise<T> => {
    const db = openLog(eventsFile);
    try {
      return await use(db);
    } finally {
      db.close();
    }
  };
  return {
    read: async () => readRawLog(eventsFile),
    count: () => withLog((db) => (db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n),
    head: () =>
      withLog(
        (db) => (db.prepare('SELECT MAX(position) AS head FROM events').get() as { head: number | null }).head ?? 0,
      ),
    countTrust: (tenant) => withLog((db) => countTrust(sqliteTrustSql(db), tenant)),
    rebuild: () => rebuildProjections(eventsFile),
  };
}

const streamOf = (tenant: string, ref: string) => `op-${tenant}:${ref}`;

/** The log's own integrity and every record against it; needs no service. */
export function checkLog(log: RawLog, records: readonly LoadRecord[], report: CheckReport, tenant = 'default'): void {
  checkUniqueIds(log, report);
  for (const [stream, events] of log.streams) checkStream(stream, events, report);
  for (const record of records) {
    if (record.kind === 'ack') checkAck(log, record, report, tenant);
    else if (record.kind === 'refusal') checkRefusal(log, record, report, tenant);
  }
  checkToolWrites(
    log,
    records.filter((record): record is ToolWriteRecord => record.kind === 'tool_write'),
    report,
    tenant,
  );
}

function checkUniqueIds(log: RawLog, report: CheckReport): void {
  const outcome = report.unique_event_ids;
  for (const [id, events] of log.byId) {
    outcome.checked += 1;
    if (events.length > 1)
      outcome.failures.push(
        `event id ${id} stored ${events.length} times (${events.map((e) => `${e.stream}@${e.revision}`).join(', ')})`,
      );
  }
}

function checkStream(stream: string, events: StoredEvent[], report: CheckReport): void {
  report.contiguous_revisions.checked += 1;
  events.forEach((event, index) => {
    if (event.revision !== index)
      report.contiguous_revisions.failures.push(`${stream}: revision ${event.revision} at index ${index}`);
    if (index > 0 && event.position <= events[index - 1].position) {
      report.contiguous_revisions.failures.push(
        `${stream}: position ${event.position} of revision ${event.revision} is not after the previous one`,
      );
    }
  });
  report.hash_chain.checked += 1;
  const broken = verifyChain(events);
  if (broken)
    report.hash_chain.failures.push(`${stream}: ${broken.reason} at revision ${broken.revision} (${broken.event_id})`);

  // The transitions alone must read as one walk through section 4's state machine.
  const machine = report.state_machine;
  machine.checked += 1;
  let status = 'unplanned';
  const seen = new Set<string>();
  for (const event of events) {
    const cause = event.metadata.causation_event_id;
    if (cause !== undefined && !seen.has(cause))
      machine.failures.push(`${stream}@${event.revision}: caused by ${cause}, which is not earlier in the stream`);
    seen.add(event.event_id);
    if (event.type !== 'TransitionRecorded') continue;
    const data = event.data as { from: string; to: string; caused_by: string };
    if (data.caused_by !== cause)
      machine.failures.push(`${stream}@${event.revision}: caused_by ${data.caused_by} but causation ${cause}`);
    if (data.from !== status)
      machine.failures.push(`${stream}@${event.revision}: transition from ${data.from} while the stream was ${status}`);
    if (TERMINAL.has(status))
      machine.failures.push(`${stream}@${event.revision}: transition after the terminal ${status}`);
    if (data.to === 'dispatched' && !DISPATCHABLE_FROM.has(status)) {
      machine.failures.push(`${stream}@${event.revision}: a dispatch was granted in ${status}`);
    }
    status = data.to;
  }
}

/** The last event the fact caused, the fact included: what the first answer to it reported. */
function lastCausedBy(log: RawLog, eventId: string): StoredEvent | undefined {
  const related = [...(log.byId.get(eventId) ?? []), ...(log.byCause.get(eventId) ?? [])];
  return related.sort((a, b) => a.revision - b.revision).at(-1);
}

function checkAck(log: RawLog, ack: AckRecord, report: CheckReport, tenant: string): void {
  const present = report.acknowledged_in_log;
  const answer = report.ack_answer_matches_log;
  present.checked += 1;
  const stream = streamOf(tenant, ack.ref);
  const stored = log.byId.get(ack.event_id) ?? [];
  if (stored.length === 0) {
    // A plan repeated with the same definition under a new id is the plan already in the log
    // (docs/contract.md §3: the same key with the same parameters is the same step); the answer must say so.
    const plans = (log.streams.get(stream) ?? []).filter((event) => event.type === 'StepPlanned');
    if (ack.type === 'StepPlanned' && ack.status === 'duplicate' && plans.length === 1) return;
    present.failures.push(
      `${ack.type} ${ack.event_id} on ${ack.ref} acknowledged ${ack.status} at revision ${ack.revision}, not in the log`,
    );
    return;
  }
  if (stored.length > 1) return; // counted by unique_event_ids
  const event = stored[0];
  answer.checked += 1;
  const problems: string[] = [];
  if (event.stream !== stream) problems.push(`stored in ${event.stream}`);
  const expectedType = ack.replayed ? 'DispatchRefused' : ack.type;
  if (event.type !== expectedType)
    problems.push(`stored as ${event.type}, answered as ${ack.replayed ? 'a replay' : ack.type}`);
  if (ack.replayed && (event.data as { code?: string }).code !== 'DUPLICATE_PREVENTED')
    problems.push('a replay not recorded as DUPLICATE_PREVENTED');
  const last = lastCausedBy(log, ack.event_id);
  if (last && (last.revision !== ack.revision || last.position !== ack.position)) {
    problems.push(
      `answered revision ${ack.revision} position ${ack.position}, the log has ${last.revision} / ${last.position}`,
    );
  }
  const upTo = (log.streams.get(event.stream) ?? []).filter((e) => e.revision <= ack.revision);
  const folded = fold(upTo.map(toRecorded)).status;
  if (folded !== ack.state_status)
    problems.push(`answered state ${ack.state_status}, the log folds to ${folded} at revision ${ack.revision}`);
  if (problems.length > 0) answer.failures.push(`${ack.type} ${ack.event_id} on ${ack.ref}: ${problems.join('; ')}`);
}

function checkRefusal(log: RawLog, refusal: RefusalRecord, report: CheckReport, tenant: string): void {
  const outcome = report.refusals_recorded;
  outcome.checked += 1;
  const stored = log.byId.get(refusal.event_id) ?? [];
  const label = `${refusal.type} ${refusal.event_id} on ${refusal.ref} refused ${refusal.code}`;
  const mustBeRecorded = refusal.type === 'AttemptDispatched' && RECORDED_DISPATCH_REFUSALS.has(refusal.code);
  // An envelope of an attempt the ledger granted earlier is kept as evidence (docs/contract.md §4.9).
  const lateOutcome =
    refusal.type === 'EnvelopeRecorded' &&
    refusal.code === 'ATTEMPT_MISMATCH' &&
    stored.length === 1 &&
    stored[0].type === 'LateOutcomeRecorded';
  if (!mustBeRecorded && !lateOutcome) {
    if (stored.length > 0) outcome.failures.push(`${label}, yet stored as ${stored.map((e) => e.type).join(', ')}`);
    return;
  }
  if (stored.length !== 1) {
    outcome.failures.push(`${label}: DispatchRefused stored ${stored.length} times`);
    return;
  }
  if (lateOutcome) return;
  const [event] = stored;
  const code = (event.data as { code?: string }).code;
  if (event.type !== 'DispatchRefused' || code !== refusal.code || event.stream !== streamOf(tenant, refusal.ref)) {
    outcome.failures.push(`${label}: stored as ${event.type} ${String(code)} in ${event.stream}`);
    return;
  }
  const last = lastCausedBy(log, refusal.event_id);
  if (refusal.revision !== undefined && last && last.revision !== refusal.revision) {
    outcome.failures.push(`${label}: answered revision ${refusal.revision}, the log has ${last.revision}`);
  }
}

/** The provider's side: at most one write per operation, and only for an attempt the ledger granted. */
function checkToolWrites(log: RawLog, writes: readonly ToolWriteRecord[], report: CheckReport, tenant: string): void {
  const outcome = report.tool_writes;
  const perRef = new Map<string, ToolWriteRecord[]>();
  for (const write of writes) perRef.set(write.ref, [...(perRef.get(write.ref) ?? []), write]);
  for (const [ref, list] of perRef) {
    outcome.checked += 1;
    if (list.length > 1)
      outcome.failures.push(
        `${ref}: the provider wrote ${list.length} times (attempts ${list.map((w) => w.attempt).join(', ')})`,
      );
    const events = log.streams.get(streamOf(tenant, ref)) ?? [];
    for (const write of list) {
      const granted = events.some(
        (event) => event.type === 'AttemptDispatched' && (event.data as { attempt?: number }).attempt === write.attempt,
      );
      if (!granted)
        outcome.failures.push(`${ref}: the provider wrote attempt ${write.attempt}, which the log never granted`);
    }
  }
}

async function getJson(url: string): Promise<{ status: number; body: any }> {
  const response = await fetch(url);
  const text = await response.text();
  return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
}

/** GET /v1/operations/:ref for every stream, against the fold of the stream as stored. */
export async function checkServedState(
  baseUrl: string,
  log: RawLog,
  report: CheckReport,
  concurrency = 8,
): Promise<void> {
  const outcome = report.served_state_equals_fold;
  const streams = [...log.streams.entries()];
  let next = 0;
  const worker = async () => {
    while (next < streams.length) {
      const [stream, events] = streams[next++];
      const ref = events[0].metadata.operation_ref;
      outcome.checked += 1;
      const served = await getJson(`${baseUrl}/v1/operations/${encodeURIComponent(ref)}`);
      if (served.status !== 200) {
        outcome.failures.push(`${ref}: GET answered ${served.status}`);
        continue;
      }
      const last = events[events.length - 1];
      const expected = JSON.parse(JSON.stringify(stateView(ref, fold(events.map(toRecorded)), last.revision)));
      if (canonicalJson(served.body) !== canonicalJson(expected)) {
        outcome.failures.push(
          `${stream}: served ${canonicalJson(served.body)} but the log folds to ${canonicalJson(expected)}`,
        );
      }
      // And without the fold: the status is the last transition's target.
      const lastTransition = [...events].reverse().find((event) => event.type === 'TransitionRecorded');
      const to = (lastTransition?.data as { to?: string } | undefined)?.to;
      if (served.body.status !== to)
        outcome.failures.push(`${stream}: served status ${served.body.status}, last transition to ${to}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

const lastTransitionTo = (events: readonly StoredEvent[]) =>
  ([...events].reverse().find((event) => event.type === 'TransitionRecorded')?.data as { to?: string } | undefined)?.to;

/** Every page of a cursor-paged list (bounded: a cursor that repeats ends it, as a failure). */
async function allPages<T>(
  url: (cursor: string | undefined) => string,
  itemsOf: (body: any) => T[],
  failures: string[],
): Promise<T[] | undefined> {
  const items: T[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let page = 0; page < 10_000; page++) {
    const answer = await getJson(url(cursor));
    if (answer.status !== 200) {
      failures.push(`${url(cursor)} answered ${answer.status} ${JSON.stringify(answer.body)}`);
      return undefined;
    }
    items.push(...itemsOf(answer.body));
    cursor = answer.body.next_cursor;
    if (!cursor) return items;
    if (seen.has(cursor)) {
      failures.push(`${url(cursor)}: the cursor repeats`);
      return items;
    }
    seen.add(cursor);
  }
  return items;
}

/**
 * The readers' projections as served (evidence trail, run summary, recovery list) against the log:
 * every event of a stream in its trail, in order; every planned step in its run with the state its
 * transitions reached; exactly the in-flight and verifying streams in the recovery list, oldest first.
 */
export async function checkServedProjections(
  baseUrl: string,
  log: RawLog,
  report: CheckReport,
  concurrency = 8,
): Promise<void> {
  const outcome = report.projections_served_equal_log;
  const head = log.events.length === 0 ? 0 : log.events[log.events.length - 1].position;
  const wait = `wait_for_position=${head}&wait_timeout_ms=30000`;
  const probe = await getJson(`${baseUrl}/v1/recovery?${wait}`);
  if (probe.status === 404) {
    outcome.notRun = 'GET /v1/recovery is not served by this build';
    return;
  }
  const streams = [...log.streams.entries()];
  const runs = new Map<string, Map<string, StoredEvent[]>>();
  for (const [, events] of streams) {
    const plan = events.find((event) => event.type === 'StepPlanned');
    const runId = (plan?.data as { run_id?: string } | undefined)?.run_id;
    if (runId === undefined) continue;
    if (!runs.has(runId)) runs.set(runId, new Map());
    runs.get(runId)?.set(events[0].metadata.operation_ref, events);
  }

  let next = 0;
  const evidenceWorker = async () => {
    while (next < streams.length) {
      const [stream, events] = streams[next++];
      const ref = events[0].metadata.operation_ref;
      outcome.checked += 1;
      const path = `${baseUrl}/v1/operations/${encodeURIComponent(ref)}/evidence?${wait}&limit=1000`;
      const entries = await allPages(
        (cursor) => `${path}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        (body) => body.entries ?? [],
        outcome.failures,
      );
      if (!entries) continue;
      const served = entries.map((entry: any) => `${entry.revision}:${entry.event_id}`).join(',');
      const stored = events.map((event) => `${event.revision}:${event.event_id}`).join(',');
      if (served !== stored) outcome.failures.push(`${stream}: evidence lists ${served}, the log holds ${stored}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, evidenceWorker));

  for (const [runId, steps] of runs) {
    outcome.checked += 1;
    const path = `${baseUrl}/v1/runs/${encodeURIComponent(runId)}?${wait}&limit=1000`;
    const served = await allPages(
      (cursor) => `${path}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      (body) => body.steps ?? [],
      outcome.failures,
    );
    if (!served) continue;
    const servedRefs = new Set(served.map((step: any) => step.operation_ref));
    for (const ref of steps.keys())
      if (!servedRefs.has(ref)) outcome.failures.push(`run ${runId}: step ${ref} is missing`);
    for (const step of served as any[]) {
      const events = steps.get(step.operation_ref);
      if (!events) {
        outcome.failures.push(`run ${runId}: lists ${step.operation_ref}, which the log does not have in this run`);
        continue;
      }
      const dispatched = events.filter((event) => event.type === 'AttemptDispatched').length;
      const last = events[events.length - 1];
      const want = { status: lastTransitionTo(events), attempts_used: dispatched, revision: last.revision };
      const got = { status: step.status, attempts_used: step.attempts_used, revision: step.revision };
      if (canonicalJson(want) !== canonicalJson(got))
        outcome.failures.push(
          `run ${runId} ${step.operation_ref}: served ${canonicalJson(got)}, log ${canonicalJson(want)}`,
        );
    }
  }

  outcome.checked += 1;
  const recovery = await allPages(
    (cursor) => `${baseUrl}/v1/recovery?${wait}&limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    (body) => body.items ?? [],
    outcome.failures,
  );
  if (!recovery) return;
  const pending = streams
    .filter(([, events]) => ['dispatched', 'verifying'].includes(lastTransitionTo(events) ?? ''))
    .map(([, events]) => events[0].metadata.operation_ref)
    .sort();
  const listed = recovery.map((item: any) => String(item.operation_ref));
  if (canonicalJson([...listed].sort()) !== canonicalJson(pending)) {
    outcome.failures.push(
      `recovery lists ${listed.join(',') || 'nothing'}, the log has ${pending.join(',') || 'nothing'} in flight or verifying`,
    );
  }
  const since = recovery.map((item: any) => Date.parse(item.since));
  if (since.some((value, index) => index > 0 && value < since[index - 1]))
    outcome.failures.push('recovery is not oldest first');
}

/**
 * GET /v1/metrics/trust, once the projection has applied the whole log, against the SQL count.
 * Answers whether the endpoint was there.
 */
export async function checkTrustMetrics(
  baseUrl: string,
  log: LogSource,
  report: CheckReport,
  tenant = 'default',
): Promise<void> {
  const outcome = report.trust_metrics_equal_count;
  const head = await log.head();
  const served = await getJson(
    `${baseUrl}/v1/metrics/trust?wait_for_position=${head}&wait_timeout_ms=30000&limit=1000`,
  );
  if (served.status === 404 && served.body?.code !== 'OPERATION_NOT_FOUND') {
    outcome.notRun = 'GET /v1/metrics/trust is not served by this build';
    return;
  }
  if (served.status !== 200) {
    outcome.failures.push(`GET /v1/metrics/trust answered ${served.status} ${JSON.stringify(served.body)}`);
    return;
  }
  const counted = await log.countTrust(tenant);
  outcome.checked += 1;
  outcome.failures.push(...compareTrust('overall', served.body.overall, counted.overall));
  const servedTools = new Map<string, Record<string, unknown>>(
    (served.body.tools ?? []).map((tool: any) => [tool.tool, tool]),
  );
  for (const [tool, count] of Object.entries(counted.tools)) {
    outcome.checked += 1;
    outcome.failures.push(...compareTrust(tool, servedTools.get(tool), count));
  }
  for (const tool of servedTools.keys()) {
    if (!(tool in counted.tools)) outcome.failures.push(`${tool}: served, but no operation of the log uses it`);
  }
}

/** A read model built from zero by the projection engine over the log, in a temporary directory. */
export interface RebuiltReadModel {
  file: string;
  dispose(): void;
}

export function rebuildProjections(eventsFile: string): Promise<RebuiltReadModel> {
  return rebuildProjectionsFrom(SqliteEventStore.open({ file: eventsFile }));
}

/** Every projection folded from zero over `store`'s log into a fresh SQLite read model; closes `store`. */
export async function rebuildProjectionsFrom(store: EventStore): Promise<RebuiltReadModel> {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-chaos-rebuild-'));
  const file = join(dir, 'read-models.sqlite');
  const readModel = SqliteReadModel.open({ file });
  try {
    const engine = new ProjectionEngine({ store, readModel, projections: LEDGER_PROJECTIONS, restartDelayMs: null });
    await engine.rebuild();
  } finally {
    readModel.close();
    await store.close();
  }
  return { file, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * The rebuilt read model against the live one the service left behind, table by table and row by
 * row. The service must be stopped (its read model at rest) after it caught up with the log.
 */
export function checkRebuild(rebuiltFile: string, liveReadModelFile: string, report: CheckReport): void {
  const outcome = report.rebuild_equals_live;
  if (!existsSync(liveReadModelFile)) {
    outcome.notRun = `no live read model at ${liveReadModelFile}: the service runs no projection engine`;
    return;
  }
  const live = new Database(liveReadModelFile, { readonly: true, fileMustExist: true });
  const rebuilt = new Database(rebuiltFile, { readonly: true, fileMustExist: true });
  try {
    const tables = (db: Database.Database) =>
      (
        db
          .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
          .all() as { name: string }[]
      ).map((row) => row.name);
    const liveTables = tables(live);
    const rebuiltTables = tables(rebuilt);
    if (canonicalJson(liveTables) !== canonicalJson(rebuiltTables)) {
      outcome.failures.push(`tables differ: live ${liveTables.join(',')} / rebuilt ${rebuiltTables.join(',')}`);
    }
    for (const table of rebuiltTables.filter((name) => liveTables.includes(name))) {
      // A document's stamp says when that copy was written, not what it holds: two equal read
      // models differ in it (the service's own read-model check leaves it out the same way).
      const rows = (db: Database.Database) =>
        (db.prepare(`SELECT * FROM "${table}" ORDER BY 1`).all() as Record<string, unknown>[]).map(
          ({ stamp: _stamp, ...held }) => held,
        );
      const byKey = (list: Record<string, unknown>[]) =>
        new Map(list.map((row) => [String(Object.values(row)[0]), JSON.stringify(row)]));
      const liveByKey = byKey(rows(live));
      const rebuiltByKey = byKey(rows(rebuilt));
      outcome.checked += rebuiltByKey.size;
      for (const [key, row] of rebuiltByKey) {
        const other = liveByKey.get(key);
        if (other === undefined) outcome.failures.push(`${table} ${key}: in the rebuild only`);
        else if (other !== row)
          outcome.failures.push(`${table} ${key}: live ${other.slice(0, 400)} / rebuilt ${row.slice(0, 400)}`);
      }
      for (const key of liveByKey.keys())
        if (!rebuiltByKey.has(key)) outcome.failures.push(`${table} ${key}: in the live read model only`);
    }
  } finally {
    live.close();
    rebuilt.close();
  }
}

/**
 * The trust projection's documents in a read model (summed by the projection's own report
 * function, as the endpoint does) against the SQL count: the fold itself is held to the count
 * even where no service serves it.
 */
export async function checkTrustReadModel(
  readModelFile: string,
  log: LogSource,
  report: CheckReport,
  tenant = 'default',
): Promise<void> {
  const outcome = report.trust_read_model_equals_count;
  const readModel = new Database(readModelFile, { readonly: true, fileMustExist: true });
  try {
    const docs = (
      readModel.prepare('SELECT doc FROM rm_trust_metrics WHERE tenant = ? ORDER BY key').all(tenant) as {
        doc: string;
      }[]
    ).map((row) => JSON.parse(row.doc) as TrustMetricsDoc);
    const counted = await log.countTrust(tenant);
    outcome.checked += 1;
    outcome.failures.push(...compareTrust('overall', { ...trustReport(docs) }, counted.overall));
    for (const [tool, count] of Object.entries(counted.tools)) {
      outcome.checked += 1;
      const doc = docs.filter((candidate) => candidate.tool === tool);
      outcome.failures.push(...compareTrust(tool, doc.length === 1 ? { ...trustReport(doc) } : undefined, count));
    }
  } finally {
    readModel.close();
  }
}

export function figures(log: RawLog, records: readonly LoadRecord[], report: CheckReport): Figures {
  const duplicatedIds = report.unique_event_ids.failures.length;
  const duplicateWrites = report.tool_writes.failures.filter(
    (line) => line.includes('wrote') && line.includes('times'),
  ).length;
  const lost = report.acknowledged_in_log.failures.length;
  const counted = new Set<CheckName>(['acknowledged_in_log', 'unique_event_ids']);
  let mismatches = 0;
  for (const [name, outcome] of Object.entries(report) as Array<[CheckName, CheckOutcome]>) {
    if (!counted.has(name)) mismatches += outcome.failures.length;
  }
  return {
    events: log.events.length,
    streams: log.streams.size,
    facts_acknowledged: records.filter((record) => record.kind === 'ack').length,
    refusals_acknowledged: records.filter((record) => record.kind === 'refusal').length,
    resent_answered_duplicate: records.filter(
      (record) =>
        record.kind === 'ack' && record.sends > 1 && record.status === 'duplicate' && log.byId.has(record.event_id),
    ).length,
    tool_writes: records.filter((record) => record.kind === 'tool_write').length,
    lost,
    duplicated: duplicatedIds + duplicateWrites,
    mismatches: mismatches - duplicateWrites,
  };
}
