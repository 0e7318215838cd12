/**
 * The fault campaign (acknowledged means durable, docs/reliability.md): several load-client
 * processes submit facts through the SDK while the service is SIGKILLed at random moments and
 * restarted on the same data directory; some kills are aimed right after the projection engine
 * committed a batch (its checkpoint in the read model moved), so the engine dies between batches
 * too. Then the checker holds every acknowledgement against the log on disk.
 *
 * On PostgreSQL (`postgres`) every instance runs on one database; the aimed kills take the
 * instance that projects the shared read models right after a publication, and a cycle may crash
 * the database server itself instead of an instance. The checker reads the database on its own.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { readModelFile } from '../../src/adapters/sqlite/sqlite-read-model.store';
import Database from 'better-sqlite3';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import {
  checkLog,
  checkRebuild,
  checkServedProjections,
  checkServedState,
  checkTrustMetrics,
  checkTrustReadModel,
  emptyReport,
  figures,
  readRecords,
  sqliteLog,
  type CheckReport,
  type Figures,
} from './checker';
import { checkSharedRebuild, lastPublication, postgresLog } from './postgres-log';
import { newSeed, seededRandom, type Random } from './prng';
import type { ChildMessage, ClientConfig, ClientStats, LoadRecord, ParentMessage } from './records';
import { setTimeout as sleep } from 'node:timers/promises';

const LOAD_CLIENT = resolve(__dirname, 'load-client.ts');
const REGISTER = resolve(__dirname, 'swc-register.cjs');

export interface CampaignOptions {
  seed?: number;
  /** Kill cycles to run; the campaign ends after them or after `seconds`, whichever comes first. */
  cycles: number;
  /** Bound on the load phase, in seconds. */
  seconds: number;
  clients: number;
  workersPerClient: number;
  /**
   * Service processes sharing the one log (default 1). With more, each client sends to all of them
   * in turn and resends an unanswered fact to the next one, as behind a load balancer.
   */
  instances?: number;
  /** Share of cycles that stop the service with SIGTERM instead of SIGKILL (default 0.15). */
  gracefulShare?: number;
  /**
   * Run every instance with LEDGER_STORE=postgres on the database at `url` (which must be empty)
   * instead of on SQLite. With `crash` (test/support/postgres.ts: stops the server as a crash would,
   * answers how to start it again), `databaseCrashes` of the cycles crash the server instead of an
   * instance.
   */
  postgres?: { url: string; crash?: () => () => void; databaseCrashes?: number };
  /** Where the log, the read model and the records go (a fresh temporary directory by default). */
  dataDir?: string;
  keepData?: boolean;
  log?: (line: string) => void;
}

/**
 * `sigterm` is the graceful stop under the same load (docs/contract.md §7: a graceful shutdown loses no
 * acknowledged write); `random` and `after_projection_batch` are SIGKILL, a crash; `database_crash`
 * stops the PostgreSQL server as a crash would (`pg_ctl stop -m immediate`) while every instance runs.
 */
export type KillKind = 'random' | 'after_projection_batch' | 'sigterm' | 'database_crash';

/** How long a graceful stop may take before it counts as hung (and the process is SIGKILLed). */
const GRACEFUL_STOP_MS = 15_000;

export interface KillCycle {
  kind: KillKind;
  /** Which service process was stopped (-1: none, the database server was). */
  instance: number;
  /** Milliseconds of load between the restart and this kill. */
  loadMs: number;
  /** From the signal to the exit of the process. */
  stopMs: number;
  /** Events in the log when the service was killed (read afterwards from the file). */
  eventsAtKill: number;
}

export interface CampaignResult {
  seed: number;
  store: 'sqlite' | 'postgres';
  dataDir: string;
  instances: number;
  cycles: KillCycle[];
  clients: ClientStats[];
  anomalies: Array<Extract<LoadRecord, { kind: 'anomaly' }>>;
  report: CheckReport;
  figures: Figures;
  /** What each service process logged of an unexpected error (a 500): message and stack, per line. */
  serverErrors: string[];
  durationMs: number;
}

/** The `unexpected error` records of the service logs (the problem filter's, one per 500), each with its stack. */
function unexpectedErrors(logFiles: string[]): string[] {
  const found: string[] = [];
  for (const file of logFiles) {
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (!line.includes('"unexpected error"')) continue;
      try {
        const record = JSON.parse(line) as {
          time?: string;
          route?: string;
          err?: { stack?: string; message?: string };
        };
        found.push(`${record.time} ${record.route}: ${record.err?.stack ?? record.err?.message}`);
      } catch {
        found.push(line);
      }
    }
  }
  return found;
}

/** The promise's value, or undefined once `ms` have passed; the timer never outlives the race. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<undefined>((resolveLate) => (timer = setTimeout(() => resolveLate(undefined), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function serviceEnv(): Record<string, string> {
  return {
    LOG_LEVEL: 'error',
    // The campaign measures durability, not the rate limiter: one loopback caller sends a lot.
    LEDGER_RATE_LIMIT_PER_MINUTE: '10000000',
  };
}

interface RunningClient {
  child: ChildProcess;
  /** The client has loaded and is about to send its first request. */
  ready: Promise<void>;
  done: Promise<ClientStats | undefined>;
}

function startClient(config: ClientConfig): RunningClient {
  const child = fork(LOAD_CLIENT, [], {
    execArgv: ['--require', REGISTER],
    env: { ...process.env, CHAOS_CLIENT_CONFIG: JSON.stringify(config) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolveReady) => (markReady = resolveReady));
  const done = new Promise<ClientStats | undefined>((resolveDone) => {
    let stats: ClientStats | undefined;
    child.on('message', (message: ChildMessage) => {
      if (message.type === 'ready') markReady();
      if (message.type === 'done') stats = message.stats;
    });
    child.once('exit', () => {
      markReady();
      resolveDone(stats);
    });
  });
  return { child, ready, done };
}

/** The highest checkpoint in the live read model, or undefined while there is none to read. */
function projectionCheckpoint(file: string): number | undefined {
  if (!existsSync(file)) return undefined;
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
    const row = db.prepare('SELECT MAX(position) AS position FROM projection_checkpoints').get() as {
      position: number | null;
    };
    return row.position ?? undefined;
  } catch {
    // Not created yet, or busy for a moment: the next poll reads it.
    return undefined;
  } finally {
    db?.close();
  }
}

/**
 * Waits until what `read` answers (a projection checkpoint, a publication's number) has moved past
 * `after`, polling it; answers false when that does not happen within `timeoutMs` (the caller then
 * kills anyway).
 */
async function untilMoves(
  read: () => number | undefined | Promise<number | undefined>,
  after: number | undefined,
  timeoutMs: number,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const now = await read();
    if (now !== undefined && (after === undefined || now > after)) return true;
    await sleep(2);
  }
  return false;
}

/** Which of the instances projects the shared read models now (docs/postgres.md, "Read models"), if one says so. */
async function projectorOf(ledgers: readonly LedgerProcess[]): Promise<number | undefined> {
  for (const [index, ledger] of ledgers.entries()) {
    const answer = await fetch(`${ledger.baseUrl}/health/ready`).catch(() => undefined);
    const body = (await answer?.json().catch(() => undefined)) as
      { details?: { projections?: { read_models?: string } } } | undefined;
    if (body?.details?.projections?.read_models === 'projector') return index;
  }
  return undefined;
}

export async function runCampaign(options: CampaignOptions): Promise<CampaignResult> {
  const started = Date.now();
  const seed = options.seed ?? newSeed();
  const say = options.log ?? (() => undefined);
  const random: Random = seededRandom(seed);
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'ledger-chaos-'));
  mkdirSync(dataDir, { recursive: true });
  const recordsDir = join(dataDir, 'records');
  mkdirSync(recordsDir, { recursive: true });
  const eventsFile = join(dataDir, 'events.sqlite');
  const instanceCount = Math.max(1, options.instances ?? 1);
  const postgres = options.postgres;
  // One instance runs the default layout (the log and the read model under its data directory);
  // several share the log through LEDGER_EVENTS_FILE (or the database) and keep their data apart.
  const instanceDirs =
    instanceCount === 1
      ? [dataDir]
      : Array.from({ length: instanceCount }, (_, index) => join(dataDir, `instance-${index}`));
  const readModelFiles = instanceDirs.map((dir) => readModelFile(dir));
  const env = postgres
    ? { ...serviceEnv(), LEDGER_STORE: 'postgres', DATABASE_URL: postgres.url }
    : instanceCount === 1
      ? serviceEnv()
      : { ...serviceEnv(), LEDGER_EVENTS_FILE: eventsFile };
  const source = postgres ? postgresLog(postgres.url) : sqliteLog(eventsFile);
  // Which cycles crash the database server instead of an instance (drawn only on PostgreSQL, so a
  // seed replays the same schedule on SQLite as before).
  const databaseCrashCycles = new Set<number>();
  if (postgres?.crash) {
    const wanted = Math.min(postgres.databaseCrashes ?? 0, options.cycles);
    const crashes = random.fork(0x5eed);
    while (databaseCrashCycles.size < wanted) databaseCrashCycles.add(crashes.int(0, options.cycles - 1));
  }
  say(
    `chaos: seed ${seed} (CHAOS_SEED=${seed} replays the schedule), ${instanceCount} instance(s) on ` +
      `${postgres ? 'PostgreSQL' : 'SQLite'}, data ${dataDir}`,
  );

  const ledgers: LedgerProcess[] = [];
  // Each service process's log (warnings and errors: the stack of an unexpected error among them)
  // goes to a file beside its data, kept with it for a post-mortem.
  const logFiles = instanceDirs.map((_, index) => join(dataDir, `service-${index}.log`));
  for (const [index, dir] of instanceDirs.entries())
    ledgers.push(await startLedger({ dataDir: dir, env, logFile: logFiles[index], timeoutMs: 60_000 }));
  /**
   * The database server stopped as a crash would, down for a moment while every instance and
   * client goes on (answered 503 STORE_UNAVAILABLE, they resend), then started again on its data.
   */
  const crashDatabase = async (crash: () => () => void, cycle: number, cycleStart: number) => {
    const stopStart = Date.now();
    const start = crash();
    const stopMs = Date.now() - stopStart;
    await sleep(random.fork(0xdb + cycle).int(200, 1_000));
    const restartStart = Date.now();
    start();
    const events = await source.count();
    cycles.push({ kind: 'database_crash', instance: -1, loadMs: stopStart - cycleStart, stopMs, eventsAtKill: events });
    say(
      `chaos: cycle ${cycle + 1}/${options.cycles} PostgreSQL crashed (pg_ctl stop -m immediate) and started again ` +
        `in ${Date.now() - restartStart} ms, ${events} events in the log`,
    );
  };
  const recordFiles: string[] = [];
  const clients: RunningClient[] = [];
  const runTag = `chaos${seed}`;
  const cycles: KillCycle[] = [];
  const report = emptyReport();
  const shutdowns = report.graceful_shutdown;
  try {
    for (let client = 0; client < options.clients; client++) {
      const recordFile = join(recordsDir, `client-${client}.ndjson`);
      recordFiles.push(recordFile);
      clients.push(
        startClient({
          client,
          seed: random.fork(client).int(1, 0x7fffffff),
          baseUrls: ledgers.map((ledger) => ledger.baseUrl),
          recordFile,
          workers: options.workersPerClient,
          runTag,
        }),
      );
    }
    // The first kill should land under load, not while the clients are still loading their code.
    await within(Promise.all(clients.map((client) => client.ready)), 20_000);
    // The load phase starts once the clients are sending: a slow start-up on a busy machine does not
    // eat the cycles the schedule asked for.
    const loadDeadline = Date.now() + options.seconds * 1000;
    for (let cycle = 0; cycle < options.cycles && Date.now() < loadDeadline; cycle++) {
      let victim = random.int(0, instanceCount - 1);
      const roll = random.next();
      const gracefulShare = options.gracefulShare ?? 0.15;
      const graceful = roll < gracefulShare;
      const aimAtBatch = !graceful && roll < gracefulShare + 0.35;
      const loadMs = random.int(300, 2_500);
      const cycleStart = Date.now();
      await sleep(loadMs);
      if (postgres?.crash && databaseCrashCycles.has(cycle)) {
        await crashDatabase(postgres.crash, cycle, cycleStart);
        continue;
      }
      let kind: KillKind = graceful ? 'sigterm' : 'random';
      // Kill within a few milliseconds of the engine committing a batch: the next one is being read
      // or applied, so the restart must resume from the checkpoint without a gap or a repeat. Only
      // counted as such when the checkpoint was seen to move (a build without the engine has none).
      // On PostgreSQL the batch is the projector's publication to the shared read models, and the
      // victim is whichever instance projects: its successor must go on from what was published.
      if (aimAtBatch && postgres) {
        const projector = await projectorOf(ledgers);
        const published = await lastPublication(postgres.url);
        if (projector !== undefined && (await untilMoves(() => lastPublication(postgres.url), published, 2_000))) {
          victim = projector;
          kind = 'after_projection_batch';
        }
      } else if (aimAtBatch && existsSync(readModelFiles[victim])) {
        const readModelFile = readModelFiles[victim];
        const at = projectionCheckpoint(readModelFile);
        if (await untilMoves(() => projectionCheckpoint(readModelFile), at, 2_000)) kind = 'after_projection_batch';
      }
      const stopStart = Date.now();
      if (graceful) {
        shutdowns.checked += 1;
        if (
          (await within(
            ledgers[victim].stop().then(() => true),
            GRACEFUL_STOP_MS,
          )) === undefined
        ) {
          shutdowns.failures.push(
            `cycle ${cycle + 1}: SIGTERM under load did not end the service within ${GRACEFUL_STOP_MS} ms`,
          );
          await ledgers[victim].kill();
        }
      } else {
        await ledgers[victim].kill();
      }
      const stopMs = Date.now() - stopStart;
      const events = await source.count();
      cycles.push({ kind, instance: victim, loadMs: stopStart - cycleStart, stopMs, eventsAtKill: events });
      say(
        `chaos: cycle ${cycle + 1}/${options.cycles} ${graceful ? 'SIGTERM' : 'SIGKILL'} (${kind}) of instance ${victim} ` +
          `with ${events} events in the log, exited after ${stopMs} ms`,
      );
      // Down for a moment, as a crashed process is: clients see refused connections and resend.
      await sleep(random.int(0, 400));
      const restartStart = Date.now();
      ledgers[victim] = await ledgers[victim].restart();
      say(`chaos: instance ${victim} restarted in ${Date.now() - restartStart} ms`);
    }
    if (shutdowns.checked === 0) shutdowns.notRun = 'no SIGTERM cycle in this schedule';
    // The load ends with the service up: every client finishes its operations and reports.
    for (const client of clients) client.child.send({ type: 'stop' } satisfies ParentMessage);
    const stats = await within(Promise.all(clients.map((client) => client.done)), 60_000);
    if (!stats) throw new Error('load clients did not finish within 60 s of being asked to stop');

    const records = readRecords(recordFiles);
    const log = await source.read();
    say(`chaos: checking ${log.events.length} events in ${log.streams.size} streams against ${records.length} records`);
    checkLog(log, records, report);
    // Every instance must serve what the one log says, whichever of them wrote it.
    for (const ledger of ledgers) {
      await checkServedState(ledger.baseUrl, log, report);
      await checkServedProjections(ledger.baseUrl, log, report);
      await checkTrustMetrics(ledger.baseUrl, source, report);
    }
    // Stopped (gracefully) so the live read models are at rest when compared with a rebuild.
    for (const ledger of ledgers) await ledger.stop();
    const rebuilt = await source.rebuild();
    try {
      if (postgres) await checkSharedRebuild(rebuilt.file, postgres.url, report);
      else for (const readModelFile of readModelFiles) checkRebuild(rebuilt.file, readModelFile, report);
      await checkTrustReadModel(rebuilt.file, source, report);
    } finally {
      rebuilt.dispose();
    }
    return {
      seed,
      store: postgres ? 'postgres' : 'sqlite',
      dataDir,
      instances: instanceCount,
      cycles,
      clients: stats.filter((s): s is ClientStats => s !== undefined),
      anomalies: records.filter(
        (record): record is Extract<LoadRecord, { kind: 'anomaly' }> => record.kind === 'anomaly',
      ),
      report,
      figures: figures(log, records, report),
      serverErrors: unexpectedErrors(logFiles),
      durationMs: Date.now() - started,
    };
  } finally {
    for (const client of clients) if (client.child.exitCode === null) client.child.kill('SIGKILL');
    for (const ledger of ledgers) await ledger.kill();
    if (!options.keepData) rmSync(dataDir, { recursive: true, force: true });
  }
}

/** A few lines a person reads: the figures, then each failing check with its first findings. */
export function summarise(result: CampaignResult): string {
  const lines: string[] = [];
  const byKind = (kind: KillKind) => result.cycles.filter((cycle) => cycle.kind === kind).length;
  const requests = result.clients.reduce((sum, client) => sum + client.requests, 0);
  const resends = result.clients.reduce((sum, client) => sum + client.resends, 0);
  const operations = result.clients.reduce((sum, client) => sum + client.operations, 0);
  lines.push(
    `seed ${result.seed}, ${result.instances} service process(es) on one log (${result.store === 'postgres' ? 'PostgreSQL' : 'SQLite'}), ${(result.durationMs / 1000).toFixed(1)} s`,
  );
  lines.push(
    `cycles ${result.cycles.length}: SIGKILL ${byKind('random') + byKind('after_projection_batch')} (right after a projection batch ${byKind('after_projection_batch')}), ` +
      `SIGTERM ${byKind('sigterm')}` +
      (result.store === 'postgres' ? `, database crashes ${byKind('database_crash')}` : '') +
      '; ' +
      `${result.clients.length} clients, ${operations} operations, ${requests} requests, ${resends} resends of the same event id`,
  );
  const f = result.figures;
  lines.push(
    `events ${f.events} in ${f.streams} streams; facts acknowledged ${f.facts_acknowledged} ` +
      `(${f.resent_answered_duplicate} of them stored, their answer lost, and answered duplicate when resent), ` +
      `refusals ${f.refusals_acknowledged}, provider writes ${f.tool_writes}`,
  );
  lines.push(
    `lost ${f.lost}, duplicated ${f.duplicated}, mismatches ${f.mismatches}, anomalies ${result.anomalies.length}`,
  );
  for (const [name, outcome] of Object.entries(result.report)) {
    const verdict = outcome.notRun
      ? `NOT RUN (${outcome.notRun})`
      : outcome.failures.length === 0
        ? 'ok'
        : `${outcome.failures.length} FAILED`;
    lines.push(`  ${name.padEnd(28)} ${String(outcome.checked).padStart(7)} checked  ${verdict}`);
    for (const failure of outcome.failures.slice(0, 5)) lines.push(`      ${failure}`);
  }
  for (const anomaly of result.anomalies.slice(0, 10))
    lines.push(`  anomaly ${anomaly.what} ${anomaly.ref}: ${anomaly.detail}`);
  lines.push(`unexpected errors logged by the service: ${result.serverErrors.length}`);
  for (const error of result.serverErrors.slice(0, 3)) lines.push(`  ${error}`);
  return lines.join('\n');
}
