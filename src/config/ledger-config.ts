import { createHash } from 'node:crypto';
import { accessSync, constants, mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import {
  DEFAULT_ENVELOPE_LIMITS,
  DEFAULT_POLICY,
  DEFAULT_SAFE_DETAIL_KEYS,
  type EnvelopeLimits,
  type StepPolicy,
} from '@recovery-ledger/core';

export type StoreKind = 'sqlite' | 'eventstoredb' | 'postgres';

export interface LedgerConfig {
  host: string;
  port: number;
  dataDir: string;
  /**
   * The embedded store's file (default `<dataDir>/events.sqlite`). Set it to let several service
   * processes share one log (SQLite in WAL mode serialises their appends) while each keeps its own
   * read models under its own data directory.
   */
  eventsFile: string;
  store: StoreKind;
  eventStoreConnectionString?: string;
  /** The PostgreSQL database of `store: 'postgres'` (DATABASE_URL; docs/postgres.md). */
  databaseUrl?: string;
  /**
   * How long a statement to PostgreSQL may go unanswered before its connection is given up and the
   * request answered `503 STORE_UNAVAILABLE` (LEDGER_POSTGRES_QUERY_TIMEOUT_MS; docs/postgres.md, "Faults").
   */
  postgresQueryTimeoutMs: number;
  /** Raw `key:role:tenant` entries; parsed and checked by the auth module. */
  apiKeys: string[];
  apiKeysFile?: string;
  bodyLimitBytes: number;
  maxEventsPerSubmit: number;
  envelopeLimits: EnvelopeLimits;
  defaultPolicy: StepPolicy;
  groupCommit: boolean;
  /** How long the embedded store waits for another writer's lock before answering 503 STORE_UNAVAILABLE. */
  sqliteBusyTimeoutMs: number;
  maxConflictRetries: number;
  /** The most events one operation's stream may hold; an append past it is 409 STREAM_FULL (docs/contract.md §3). */
  maxStreamEvents: number;
  /**
   * Signs the log anchor (HMAC-SHA256), so someone who can edit the store but does not hold this
   * key cannot rewrite the log and its anchor together unseen (docs/reliability.md).
   */
  anchorKey?: string;
  /**
   * Where the projection engine runs on the embedded SQLite store: `worker`, a thread of its own
   * with its own connections to the same files (default), or `inline`, in the thread that answers
   * requests. EventStoreDB and a store held in memory always run it inline.
   */
  projectionsThread: 'worker' | 'inline';
  /** Run the whole-log audit and the read-model check when the service starts (default on). */
  verifyOnStart: boolean;
  /**
   * The share of one core the whole-log audit behind the service may hold (LEDGER_AUDIT_CPU_PERCENT,
   * 1–100, default 25): it never blocks reads, writes or readiness (docs/reliability.md).
   */
  auditCpuShare: number;
  /** How often the running service checks what was appended and moves its verified checkpoint up. */
  checkpointIntervalMs: number;
  /**
   * Where the service keeps the log's signed head, outside the data directory, so a restore of
   * the whole directory from an older copy is seen (docs/security.md, "A log rolled back").
   */
  headWitnessFile?: string;
  /**
   * The witness is the default one (LEDGER_HEAD_WITNESS_FILE unset): an empty log where it recorded
   * events is taken as a new log (a data directory wiped on purpose), not refused.
   */
  headWitnessByDefault: boolean;
  /** The head witness is written at most this often while appends come in, and at shutdown. */
  headWitnessIntervalMs: number;
  /** An operator's acceptance of a log found rolled back, with the reason logged (LEDGER_ACCEPT_ROLLBACK). */
  acceptRollback?: { reason: string };
  rateLimitPerMinute: number;
  logLevel: string;
  /** Lets a runtime key record ApprovalRecorded (off: only an approver key may). */
  allowSelfApproval: boolean;
  /** Node's headersTimeout: the request line and headers must arrive within it. */
  headersTimeoutMs: number;
  /** Node's requestTimeout: the whole request, body included, must arrive within it. */
  requestTimeoutMs: number;
  /** Long polls (`wait_ms` above 0 on /v1/work and /v1/changes) one key may hold open at once. */
  longPollsPerKey: number;
  /** The same, for all the keys of one tenant together. */
  longPollsPerTenant: number;
  /** How often a waiting work poll looks again when nothing of its tenant moved (docs/work-feed.md, "Long polls"). */
  workPollMs: number;
}

export const CONFIG = Symbol('LEDGER_CONFIG');

/**
 * The default of LEDGER_POSTGRES_QUERY_TIMEOUT_MS: far above any statement of the PostgreSQL
 * adapters, well below an operator's patience. Its bounds, and why a short one loses nothing:
 * docs/postgres.md, "Faults".
 */
export const POSTGRES_QUERY_TIMEOUT_MS = 15_000;

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** An integer setting from the environment, bounded; the fallback when unset; a ConfigError otherwise. */
export function integerSetting(
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

/** `true` or `false` (or unset: false); anything else stops the start, so a typo never widens access. */
function flag(env: NodeJS.ProcessEnv, name: string): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '' || raw === 'false') return false;
  if (raw === 'true') return true;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

function list(raw: string | undefined): string[] {
  return (raw ?? '')
    .split(/[,\n]/)
    .map((item) => item.trim())
    .filter((item) => item.length > 0 && !item.startsWith('#'));
}

function anchorKey(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined;
  // A short key is guessable, and a guessed key lets a forger sign a rewritten log.
  if (raw.length < 32)
    throw new ConfigError('LEDGER_ANCHOR_KEY must be at least 32 characters (for example `openssl rand -hex 32`)');
  return raw;
}

/**
 * Outside the data directory and the log's own directory: a restore of either must not bring it back
 * too. Unset on the embedded SQLite store, the witness is kept by default in the user's state
 * directory (`$XDG_STATE_HOME`, else `~/.local/state`), one file per log (named by a hash of the
 * log's path), so a restore of the whole data directory is seen with no setting at all; `off` turns
 * it off. A state directory that cannot be written leaves it off (the start warns, as when off).
 */
function headWitnessFile(
  raw: string | undefined,
  dataDir: string,
  eventsFile: string,
  store: StoreKind,
  env: NodeJS.ProcessEnv,
): string | undefined {
  if (raw === 'off') return undefined;
  const inside = (file: string, dir: string) => {
    const path = relative(dir, file);
    return path === '' || (!path.startsWith('..') && !isAbsolute(path));
  };
  if (raw === undefined || raw === '') {
    if (store !== 'sqlite') return undefined;
    const stateHome = env.XDG_STATE_HOME?.trim() || join(homedir(), '.local', 'state');
    const dir = join(resolve(stateHome), 'recovery-ledger');
    const name = createHash('sha256').update(eventsFile).digest('hex').slice(0, 16);
    const file = join(dir, `head-witness-${name}.json`);
    if (inside(file, dataDir) || inside(file, dirname(eventsFile))) return undefined;
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      accessSync(dir, constants.W_OK);
    } catch {
      return undefined;
    }
    return file;
  }
  const file = resolve(raw);
  if (inside(file, dataDir) || inside(file, dirname(eventsFile))) {
    throw new ConfigError(
      `LEDGER_HEAD_WITNESS_FILE must be outside the data directory (${dataDir}) and the log's directory: a restore of the directory would bring an old witness back with the old log`,
    );
  }
  return file;
}

function acceptRollback(env: NodeJS.ProcessEnv): { reason: string } | undefined {
  const raw = env.LEDGER_ACCEPT_ROLLBACK;
  if (raw === undefined || raw === '' || raw === '0') return undefined;
  if (raw !== '1') throw new ConfigError(`LEDGER_ACCEPT_ROLLBACK must be 1 (or unset), got "${raw}"`);
  const reason = (env.LEDGER_ACCEPT_ROLLBACK_REASON ?? '').trim();
  // The reason goes to the log beside the evidence: an acceptance nobody can explain later is refused.
  if (reason === '')
    throw new ConfigError(
      'LEDGER_ACCEPT_ROLLBACK=1 needs LEDGER_ACCEPT_ROLLBACK_REASON: why the older log is the one to keep',
    );
  return { reason };
}

function projectionsThread(raw: string | undefined): 'worker' | 'inline' {
  if (raw === undefined || raw === '' || raw === 'worker') return 'worker';
  if (raw === 'inline') return 'inline';
  throw new ConfigError(`LEDGER_PROJECTIONS_THREAD must be worker or inline, got "${raw}"`);
}

/** Reads the configuration from the environment (docs/contract.md §9); a bad value stops the start, loudly. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): LedgerConfig {
  const store = (env.LEDGER_STORE ?? 'sqlite') as StoreKind;
  if (store !== 'sqlite' && store !== 'eventstoredb' && store !== 'postgres') {
    throw new ConfigError(`LEDGER_STORE must be sqlite, eventstoredb or postgres, got "${env.LEDGER_STORE}"`);
  }
  if (store === 'postgres' && !env.DATABASE_URL) {
    throw new ConfigError('LEDGER_STORE=postgres needs DATABASE_URL (postgres://user:password@host:5432/database)');
  }
  if (store === 'eventstoredb' && !env.EVENTSTORE_CONNECTION_STRING) {
    throw new ConfigError('LEDGER_STORE=eventstoredb needs EVENTSTORE_CONNECTION_STRING');
  }
  const safeDetailKeys = env.LEDGER_SAFE_DETAIL_KEYS
    ? list(env.LEDGER_SAFE_DETAIL_KEYS)
    : [...DEFAULT_SAFE_DETAIL_KEYS];
  const dataDir = resolve(env.LEDGER_DATA_DIR ?? './data');
  const eventsFile = resolve(env.LEDGER_EVENTS_FILE || join(env.LEDGER_DATA_DIR ?? './data', 'events.sqlite'));
  return {
    host: env.HOST ?? '127.0.0.1',
    port: integerSetting(env, 'PORT', 3000, 0, 65535),
    dataDir,
    eventsFile,
    store,
    eventStoreConnectionString: env.EVENTSTORE_CONNECTION_STRING,
    databaseUrl: store === 'postgres' ? env.DATABASE_URL : undefined,
    // Not 0: without it a request on a connection whose link fell silent waits until the link is back.
    postgresQueryTimeoutMs: integerSetting(
      env,
      'LEDGER_POSTGRES_QUERY_TIMEOUT_MS',
      POSTGRES_QUERY_TIMEOUT_MS,
      1_000,
      600_000,
    ),
    apiKeys: list(env.LEDGER_API_KEYS),
    apiKeysFile: env.LEDGER_API_KEYS_FILE || undefined,
    bodyLimitBytes: integerSetting(env, 'LEDGER_BODY_LIMIT_BYTES', 256 * 1024, 1024, 64 * 1024 * 1024),
    maxEventsPerSubmit: integerSetting(env, 'LEDGER_MAX_EVENTS_PER_SUBMIT', 100, 1, 10_000),
    envelopeLimits: { ...DEFAULT_ENVELOPE_LIMITS, safeDetailKeys },
    defaultPolicy: {
      ...DEFAULT_POLICY,
      max_attempts: integerSetting(env, 'LEDGER_DEFAULT_MAX_ATTEMPTS', DEFAULT_POLICY.max_attempts, 1, 100),
      consistency_window_ms: integerSetting(
        env,
        'LEDGER_DEFAULT_CONSISTENCY_WINDOW_MS',
        DEFAULT_POLICY.consistency_window_ms,
        0,
        86_400_000,
      ),
      dispatch_timeout_ms: integerSetting(
        env,
        'LEDGER_DEFAULT_DISPATCH_TIMEOUT_MS',
        DEFAULT_POLICY.dispatch_timeout_ms,
        1000,
        86_400_000,
      ),
    },
    groupCommit: env.LEDGER_GROUP_COMMIT !== 'off',
    sqliteBusyTimeoutMs: integerSetting(env, 'LEDGER_SQLITE_BUSY_TIMEOUT_MS', 5000, 0, 600_000),
    maxConflictRetries: integerSetting(env, 'LEDGER_MAX_CONFLICT_RETRIES', 25, 0, 1000),
    maxStreamEvents: integerSetting(env, 'LEDGER_MAX_STREAM_EVENTS', 10_000, 100, 1_000_000),
    anchorKey: anchorKey(env.LEDGER_ANCHOR_KEY),
    verifyOnStart: env.LEDGER_VERIFY_ON_START !== 'off',
    auditCpuShare: integerSetting(env, 'LEDGER_AUDIT_CPU_PERCENT', 25, 1, 100) / 100,
    checkpointIntervalMs: integerSetting(env, 'LEDGER_CHECKPOINT_INTERVAL_MS', 10_000, 100, 3_600_000),
    headWitnessFile: headWitnessFile(env.LEDGER_HEAD_WITNESS_FILE, dataDir, eventsFile, store, env),
    headWitnessByDefault: (env.LEDGER_HEAD_WITNESS_FILE ?? '') === '',
    headWitnessIntervalMs: integerSetting(env, 'LEDGER_HEAD_WITNESS_INTERVAL_MS', 1000, 10, 3_600_000),
    acceptRollback: acceptRollback(env),
    projectionsThread: projectionsThread(env.LEDGER_PROJECTIONS_THREAD),
    rateLimitPerMinute: integerSetting(env, 'LEDGER_RATE_LIMIT_PER_MINUTE', 6000, 1, 10_000_000),
    logLevel: env.LOG_LEVEL ?? 'info',
    allowSelfApproval: flag(env, 'LEDGER_ALLOW_SELF_APPROVAL'),
    headersTimeoutMs: integerSetting(env, 'LEDGER_HEADERS_TIMEOUT_MS', 10_000, 100, 600_000),
    requestTimeoutMs: integerSetting(env, 'LEDGER_REQUEST_TIMEOUT_MS', 30_000, 100, 3_600_000),
    longPollsPerKey: integerSetting(env, 'LEDGER_LONG_POLLS_PER_KEY', 32, 1, 100_000),
    longPollsPerTenant: integerSetting(env, 'LEDGER_LONG_POLLS_PER_TENANT', 128, 1, 100_000),
    workPollMs: integerSetting(env, 'LEDGER_WORK_POLL_MS', 100, 10, 60_000),
  };
}
