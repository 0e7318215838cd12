/**
 * The trust metrics (docs/contract.md §5) counted straight from the events table with SQL, to hold the served
 * projection against. Nothing of projections/ is used: the definitions are written here again from
 * the causal links the log itself carries (a transition's `caused_by`, the stream's revisions), so
 * a fold that drops, double counts or misorders events shows up as a difference.
 *
 * The same statements run on the SQLite file and on PostgreSQL's `ledger_events`; a dialect says
 * only how each database spells a JSON field, a count of the rows that match, and a stream's last
 * transition.
 */
import type Database from 'better-sqlite3';
import type { ClientBase } from 'pg';

/** How one database runs the count's statements (each takes the stream prefix as its one parameter). */
export interface TrustSql {
  all<T>(sql: string, prefix: string): Promise<T[]>;
  /** The placeholder of the one parameter. */
  readonly param: string;
  /** Definitions put before the count's own in each WITH (ending in a comma), or nothing. */
  readonly prelude: string;
  /** A top-level field of a JSON text column, as text or number. */
  field(column: string, name: string): string;
  /** True where a JSON text column's field is the boolean true. */
  isTrue(column: string, name: string): string;
  /** How many rows of the group match. */
  countWhere(condition: string): string;
  /** One row per stream with a transition: `stream`, and `to_state`, its last transition's target. */
  readonly lastTransitions: string;
}

/** The events table of an SQLite log file. */
export function sqliteTrustSql(db: Database.Database): TrustSql {
  return {
    all: async <T>(sql: string, prefix: string) => db.prepare(sql).all(prefix) as T[],
    param: '?',
    prelude: '',
    field: (column, name) => `json_extract(${column}, '$.${name}')`,
    isTrue: (column, name) => `json_extract(${column}, '$.${name}') = 1`,
    countWhere: (condition) => `SUM(${condition})`,
    lastTransitions: `SELECT stream, json_extract(data, '$.to') AS to_state, MAX(revision) FROM events WHERE type = 'TransitionRecorded' GROUP BY stream`,
  };
}

/** PostgreSQL's `ledger_events` (the bodies are the text the ledger wrote: read as jsonb here). */
export function postgresTrustSql(client: ClientBase): TrustSql {
  return {
    all: async <T>(sql: string, prefix: string) => (await client.query(sql, [prefix])).rows as T[],
    param: '$1',
    prelude: 'events AS (SELECT stream, revision, event_id, type, data, metadata FROM ledger_events),',
    field: (column, name) => `(${column}::jsonb ->> '${name}')`,
    isTrue: (column, name) => `(${column}::jsonb -> '${name}') = 'true'::jsonb`,
    countWhere: (condition) => `COUNT(*) FILTER (WHERE ${condition})`,
    lastTransitions: `SELECT DISTINCT ON (stream) stream, data::jsonb ->> 'to' AS to_state FROM events WHERE type = 'TransitionRecorded' ORDER BY stream, revision DESC`,
  };
}

export interface TrustCount {
  operations_planned: number;
  unknown_outcomes: number;
  unknown_via_envelope: number;
  unknown_in_flight: number;
  verified_found_committed: number;
  verified_not_found: number;
  lookup_unavailable: number;
  resolved_by_verification: number;
  duplicate_writes_prevented: number;
  identical_retries_blocked: number;
  unverified_dispatches_refused: number;
  terminal_escalations: number;
  succeeded: number;
  possible_duplicates: number;
  pending_recovery_now: number;
  dispatch_refusals: Record<string, number>;
  escalations_by_reason: Record<string, number>;
  /** Exact over every verification: the projection's min and max are exact too (its percentiles are not). */
  pending_recovery: { count: number; min_ms: number; max_ms: number };
}

export interface TrustCountResult {
  overall: TrustCount;
  tools: Record<string, TrustCount>;
}

function empty(): TrustCount {
  return {
    operations_planned: 0,
    unknown_outcomes: 0,
    unknown_via_envelope: 0,
    unknown_in_flight: 0,
    verified_found_committed: 0,
    verified_not_found: 0,
    lookup_unavailable: 0,
    resolved_by_verification: 0,
    duplicate_writes_prevented: 0,
    identical_retries_blocked: 0,
    unverified_dispatches_refused: 0,
    terminal_escalations: 0,
    succeeded: 0,
    possible_duplicates: 0,
    pending_recovery_now: 0,
    dispatch_refusals: {},
    escalations_by_reason: {},
    pending_recovery: { count: 0, min_ms: 0, max_ms: 0 },
  };
}

/** Counts one tenant's streams (`op-<tenant>:…`). */
export async function countTrust(sql: TrustSql, tenant: string): Promise<TrustCountResult> {
  const prefix = `op-${tenant}:%`;
  const tools: Record<string, TrustCount> = {};
  const of = (tool: string) => (tools[tool] ??= empty());
  const { field: f, countWhere: n } = sql;
  const WITH = `WITH ${sql.prelude} plans AS (
    SELECT stream, ${f('data', 'tool')} AS tool FROM events WHERE type = 'StepPlanned' AND stream LIKE ${sql.param}
  )`;
  // PostgreSQL answers counts as text (bigint): every figure is read through Number.
  const rows = async (statement: string) =>
    (await sql.all<Record<string, string | number | null>>(statement, prefix)).map((row) =>
      Object.fromEntries(
        Object.entries(row).map(([key, value]) => [key, key === 'n' || key.endsWith('_n') ? Number(value) : value]),
      ),
    );

  const simple = await rows(
    `${WITH}
     SELECT p.tool AS tool,
       ${n("e.type = 'StepPlanned'")} AS planned_n,
       ${n(`e.type = 'TransitionRecorded' AND ${f('e.data', 'to')} = 'verifying'`)} AS via_envelope_n,
       ${n(`e.type = 'TransitionRecorded' AND ${f('e.data', 'to')} = 'escalated'`)} AS escalated_n,
       ${n(`e.type = 'TransitionRecorded' AND ${f('e.data', 'to')} = 'succeeded'`)} AS succeeded_n,
       ${n(`e.type = 'VerificationRecorded' AND ${f('e.data', 'outcome')} = 'found_committed'`)} AS found_n,
       ${n(`e.type = 'VerificationRecorded' AND ${f('e.data', 'outcome')} = 'not_found'`)} AS not_found_n,
       ${n(`e.type = 'VerificationRecorded' AND ${f('e.data', 'outcome')} = 'lookup_unavailable'`)} AS unavailable_n,
       ${n(`e.type = 'LateOutcomeRecorded' AND ${sql.isTrue('e.data', 'possible_duplicate')}`)} AS possible_duplicates_n
     FROM events e JOIN plans p ON p.stream = e.stream
     GROUP BY p.tool`,
  );
  for (const row of simple) {
    const count = of(String(row.tool));
    count.operations_planned = row.planned_n as number;
    count.unknown_via_envelope = row.via_envelope_n as number;
    count.terminal_escalations = row.escalated_n as number;
    count.succeeded = row.succeeded_n as number;
    count.verified_found_committed = row.found_n as number;
    count.verified_not_found = row.not_found_n as number;
    count.lookup_unavailable = row.unavailable_n as number;
    count.possible_duplicates = row.possible_duplicates_n as number;
  }

  const refusals = await rows(
    `${WITH}
     SELECT p.tool AS tool, ${f('e.data', 'code')} AS code, COUNT(*) AS n
     FROM events e JOIN plans p ON p.stream = e.stream
     WHERE e.type = 'DispatchRefused' GROUP BY p.tool, code`,
  );
  for (const row of refusals) {
    const count = of(String(row.tool));
    const code = String(row.code);
    const times = row.n as number;
    count.dispatch_refusals[code] = times;
    if (code === 'DUPLICATE_PREVENTED') count.duplicate_writes_prevented += times;
    if (code === 'UNCHANGED_RETRY') count.identical_retries_blocked += times;
    if (code === 'ATTEMPT_IN_FLIGHT' || code === 'VERIFY_BEFORE_RETRY') count.unverified_dispatches_refused += times;
  }

  const escalations = await rows(
    `${WITH}
     SELECT p.tool AS tool, ${f('e.data', 'reason')} AS reason, COUNT(*) AS n
     FROM events e JOIN plans p ON p.stream = e.stream
     WHERE e.type = 'TransitionRecorded' AND ${f('e.data', 'to')} = 'escalated' GROUP BY p.tool, reason`,
  );
  for (const row of escalations) of(String(row.tool)).escalations_by_reason[String(row.reason)] = row.n as number;

  // Each verification and the transition it caused: `from` says whether the outcome was pending as
  // an unknown envelope (verifying) or as an attempt that never answered (dispatched); the pending
  // time runs from the transition that entered that state to the verification.
  const verifications = await rows(
    `${WITH}
     SELECT p.tool AS tool,
       ${f('t.data', 'from')} AS from_state,
       ${f('v.metadata', 'recorded_at')} AS resolved_at,
       (SELECT ${f('s.metadata', 'recorded_at')} FROM events s
          WHERE s.stream = v.stream AND s.type = 'TransitionRecorded' AND s.revision < v.revision
            AND ${f('s.data', 'to')} = ${f('t.data', 'from')}
          ORDER BY s.revision DESC LIMIT 1) AS pending_since
     FROM events v
     JOIN events t ON t.stream = v.stream AND t.type = 'TransitionRecorded' AND ${f('t.data', 'caused_by')} = v.event_id
     JOIN plans p ON p.stream = v.stream
     WHERE v.type = 'VerificationRecorded'`,
  );
  for (const row of verifications) {
    const count = of(String(row.tool));
    if (row.from_state === 'dispatched') count.unknown_in_flight += 1;
    const ms =
      row.pending_since === null ? NaN : Date.parse(String(row.resolved_at)) - Date.parse(String(row.pending_since));
    const pending = count.pending_recovery;
    pending.min_ms = pending.count === 0 ? ms : Math.min(pending.min_ms, ms);
    pending.max_ms = pending.count === 0 ? ms : Math.max(pending.max_ms, ms);
    pending.count += 1;
  }

  const pendingNow = await rows(
    `${WITH}, last AS (${sql.lastTransitions})
     SELECT p.tool AS tool, COUNT(*) AS n FROM last JOIN plans p ON p.stream = last.stream WHERE last.to_state = 'verifying' GROUP BY p.tool`,
  );
  for (const row of pendingNow) of(String(row.tool)).pending_recovery_now = row.n as number;

  for (const count of Object.values(tools)) finish(count);
  return { overall: sum(Object.values(tools)), tools };
}

function finish(count: TrustCount): void {
  count.unknown_outcomes = count.unknown_via_envelope + count.unknown_in_flight;
  count.resolved_by_verification = count.verified_found_committed + count.verified_not_found;
}

function sum(counts: TrustCount[]): TrustCount {
  const total = empty();
  for (const count of counts) {
    for (const key of Object.keys(total) as Array<keyof TrustCount>) {
      const value = count[key];
      if (typeof value === 'number') (total[key] as number) += value;
    }
    for (const [code, n] of Object.entries(count.dispatch_refusals))
      total.dispatch_refusals[code] = (total.dispatch_refusals[code] ?? 0) + n;
    for (const [reason, n] of Object.entries(count.escalations_by_reason)) {
      total.escalations_by_reason[reason] = (total.escalations_by_reason[reason] ?? 0) + n;
    }
    const pending = count.pending_recovery;
    if (pending.count > 0) {
      const into = total.pending_recovery;
      into.min_ms = into.count === 0 ? pending.min_ms : Math.min(into.min_ms, pending.min_ms);
      into.max_ms = into.count === 0 ? pending.max_ms : Math.max(into.max_ms, pending.max_ms);
      into.count += pending.count;
    }
  }
  return total;
}

/** The fields of a served report that must equal the count; answers a line per difference. */
export function compareTrust(
  label: string,
  served: Record<string, unknown> | undefined,
  counted: TrustCount,
): string[] {
  if (!served) return [`${label}: not served at all`];
  const differences: string[] = [];
  for (const key of Object.keys(counted) as Array<keyof TrustCount>) {
    const want = counted[key];
    if (key === 'pending_recovery') {
      const got = (served.pending_recovery ?? {}) as Record<string, unknown>;
      for (const field of ['count', 'min_ms', 'max_ms'] as const) {
        if (got[field] !== want[field as keyof typeof want]) {
          differences.push(
            `${label}.pending_recovery.${field}: served ${String(got[field])}, counted ${String((want as Record<string, number>)[field])}`,
          );
        }
      }
      continue;
    }
    const got = served[key];
    const same = typeof want === 'object' ? sameCounts(got, want) : got === want;
    if (!same) differences.push(`${label}.${key}: served ${JSON.stringify(got)}, counted ${JSON.stringify(want)}`);
  }
  return differences;
}

function sameCounts(got: unknown, want: Record<string, number>): boolean {
  if (!got || typeof got !== 'object') return false;
  const served = Object.entries(got as Record<string, number>).filter(([, n]) => n !== 0);
  const counted = Object.entries(want).filter(([, n]) => n !== 0);
  return served.length === counted.length && counted.every(([key, n]) => (got as Record<string, number>)[key] === n);
}
