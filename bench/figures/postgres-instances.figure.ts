/**
 * The PostgreSQL instances figure (docs/postgres.md, "Measured"): tool steps/s with one, two (and
 * three) ledger instances on one PostgreSQL, beside the ledger on its embedded SQLite store and
 * Restate, each measured in the same run with the tool-step figure's load (bench/support/tool-steps.load.ts).
 *
 *   sqlite      the built service on its embedded store (as the tool-step figure's `ledger`);
 *   pg-N        N built instances, LEDGER_STORE=postgres, on one database of a private cluster
 *               (Debian's server, fsync and synchronous_commit on); the load's connections are
 *               given to the instances in turn, as a round-robin balancer with keep-alive would;
 *   restate     Restate server + Node SDK, as in the tool-step figure.
 * Each round starts every configuration fresh (a new database per pg-N), in one order and then the
 * reverse. CPU per step is counted over the measured window for the ledger processes and the
 * database server (postmaster and every backend) together, and for each apart; the load process's
 * own CPU is reported apart and counted in neither. Draws steps/s and CPU per step against the
 * number of instances to docs/postgres-instances.png (the SVG beside it).
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { Client } from 'pg';
import { join } from 'node:path';
import { postgresBinaries, startPostgres, type Postgres } from '../support/peers/postgres';
import { LEDGER_MAIN, serve, type Served } from '../support/processes';
import type { FigureRow } from '../support/report';
import { drawSvgAsPng, escape, panelFrame } from '../support/restart-chart';
import { drive, median, stepJob, Systems, type Running } from './tool-steps.figure';
import { setTimeout as sleep } from 'node:timers/promises';

export interface PostgresInstancesSettings {
  dir: string;
  seconds: number;
  warmupSeconds: number;
  connections: number;
  rounds: number;
  /** The largest number of instances measured (2 or 3). */
  maxInstances: number;
  /** Where the chart is drawn (PNG). */
  chart: string;
}

type Config = 'sqlite' | 'restate' | `pg-${number}`;

interface Measurement {
  config: Config;
  round: number;
  stepsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  steps: number;
  failed: number;
  /** The system's CPU per step: ledger + database, or Restate server + service, or the ledger alone. */
  cpuMsPerStep: number;
  ledgerCpuMsPerStep?: number;
  databaseCpuMsPerStep?: number;
  loadCpuMsPerStep: number;
  /** Of the machine's CPU over the measured window (every core): busy, and used by this system and the load. */
  machineBusy: number;
  systemShare: number;
  loadShare: number;
  /** What the database did over the measured window (pg-N only). */
  database?: DatabaseActivity;
}

/** Busy and total jiffies of every core so far (/proc/stat's first line). */
function machineJiffies(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const total = fields.slice(0, 8).reduce((sum, value) => sum + value, 0);
  // idle and iowait are not busy.
  return { busy: total - fields[3] - fields[4], total };
}

interface DatabaseActivity {
  commitsPerStep: number;
  /** WAL flushes to disk (pg_stat_wal.wal_sync) per commit: 1 means no two commits shared a flush. */
  walSyncsPerCommit: number;
  /** Backends of the bench's database seen active, on average, by what they waited on (`CPU` when nothing). */
  activeBackendsByWait: Record<string, number>;
}

/**
 * Watches the bench's database while the load runs: commits and WAL flushes from the statistics
 * views, and every 200 ms what each active backend waits on (pg_stat_activity). Its own connection
 * is to another database, so it neither counts nor is counted.
 */
class DatabaseProbe {
  private samples = 0;
  private readonly waits = new Map<string, number>();
  private timer?: NodeJS.Timeout;
  private before?: { commits: number; syncs: number };
  private sampling = Promise.resolve();

  private constructor(
    private readonly client: Client,
    private readonly database: string,
  ) {}

  static async open(postgres: Postgres, database: string): Promise<DatabaseProbe> {
    const client = new Client({ connectionString: postgres.url('postgres') });
    await client.connect();
    return new DatabaseProbe(client, database);
  }

  private async counters(): Promise<{ commits: number; syncs: number }> {
    const { rows } = await this.client.query<{ commits: string; syncs: string }>(
      `SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = $1) AS commits,
              (SELECT wal_sync FROM pg_stat_wal) AS syncs`,
      [this.database],
    );
    return { commits: Number(rows[0].commits), syncs: Number(rows[0].syncs) };
  }

  /** Called when the measured window opens. */
  begin(): void {
    this.sampling = this.counters().then((counters) => {
      this.before = counters;
      this.timer = setInterval(() => {
        this.sampling = this.sampling.then(() => this.sample()).catch(() => undefined);
      }, 200);
    });
  }

  private async sample(): Promise<void> {
    const { rows } = await this.client.query<{ wait: string; n: string }>(
      `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS wait, count(*) AS n
         FROM pg_stat_activity WHERE datname = $1 AND state = 'active' GROUP BY 1`,
      [this.database],
    );
    this.samples += 1;
    for (const row of rows) this.waits.set(row.wait, (this.waits.get(row.wait) ?? 0) + Number(row.n));
  }

  /** Called after the window closed: what was seen, per step. */
  async end(steps: number): Promise<DatabaseActivity | undefined> {
    clearInterval(this.timer);
    await this.sampling;
    const after = await this.counters();
    await this.client.end();
    if (!this.before || steps === 0) return undefined;
    const commits = after.commits - this.before.commits;
    const activeBackendsByWait = Object.fromEntries(
      [...this.waits]
        .sort((a, b) => b[1] - a[1])
        .map(([wait, n]) => [wait, Number((n / Math.max(1, this.samples)).toFixed(2))]),
    );
    return {
      commitsPerStep: commits / steps,
      walSyncsPerCommit: commits > 0 ? (after.syncs - this.before.syncs) / commits : 0,
      activeBackendsByWait,
    };
  }
}

export interface PostgresInstancesOutput {
  rows: FigureRow[];
  text: string;
  measurements: Measurement[];
  skipped: Record<string, string>;
}

const NAMES: Record<string, string> = {
  sqlite: 'ledger on its embedded SQLite store, one instance',
  restate: 'Restate 1.7.12 server + Node SDK 1.17.2 (CPU: server + service)',
};
const nameOf = (config: Config) =>
  NAMES[config] ?? `ledger on PostgreSQL, ${config.slice(3)} instance(s) (CPU: ledger processes + database server)`;

/** N built instances on a fresh database of `postgres`, each with a data directory of its own. */
async function startInstances(postgres: Postgres, dir: string, label: string, count: number): Promise<Running> {
  postgres.createDatabase(label);
  const instances: Served[] = [];
  try {
    // One after the other: the first creates the tables (under an advisory lock either way).
    for (let index = 0; index < count; index++) {
      const dataDir = join(dir, `${label}_${index}`);
      mkdirSync(dataDir, { recursive: true });
      instances.push(
        await serve(
          LEDGER_MAIN,
          {
            LEDGER_DATA_DIR: dataDir,
            LOG_LEVEL: 'warn',
            LEDGER_RATE_LIMIT_PER_MINUTE: '10000000',
            LEDGER_STORE: 'postgres',
            DATABASE_URL: postgres.url(label),
          },
          async (baseUrl) => (await fetch(`${baseUrl}/health/ready`)).ok,
        ),
      );
    }
  } catch (error) {
    for (const instance of instances) await instance.stop();
    throw error;
  }
  const ledgerPids = instances.map((instance) => instance.pid);
  return {
    url: instances.map((instance) => instance.baseUrl),
    kind: 'ledger',
    pids: [...ledgerPids, postgres.pid],
    parts: { ledger: ledgerPids, database: [postgres.pid] },
    stored: () =>
      Number(
        postgres
          .query(
            label,
            // The label is [a-z0-9_] only: safe inside the literal.
            `SELECT count(*) FROM ledger_events WHERE type = 'EnvelopeRecorded' AND stream LIKE 'op-default:${label}/%'`,
          )
          .trim(),
      ),
    stop: async () => {
      for (const instance of instances) await instance.stop();
    },
  };
}

/** The machine's busy share over the window, and the parts of it this system and the load used (USER_HZ 100). */
function shares(
  start: { busy: number; total: number },
  end: { busy: number; total: number },
  systemMsPerStep: number,
  loadMsPerStep: number,
  steps: number,
): { machineBusy: number; systemShare: number; loadShare: number } {
  const totalMs = (end.total - start.total) * 10;
  if (totalMs <= 0) return { machineBusy: 0, systemShare: 0, loadShare: 0 };
  return {
    machineBusy: ((end.busy - start.busy) * 10) / totalMs,
    systemShare: (systemMsPerStep * steps) / totalMs,
    loadShare: (loadMsPerStep * steps) / totalMs,
  };
}

const fmt = (value: number) =>
  value >= 100 ? Math.round(value).toLocaleString('en-US') : value >= 10 ? value.toFixed(1) : value.toFixed(2);

export async function postgresInstancesFigure(
  settings: PostgresInstancesSettings,
  log: (line: string) => void,
): Promise<PostgresInstancesOutput> {
  const skipped: Record<string, string> = {};
  const found = postgresBinaries(log);
  if ('skip' in found) {
    log(`  PostgreSQL instances: skipped: ${found.skip}`);
    return { rows: [], text: `skipped: ${found.skip}`, measurements: [], skipped: { postgres: found.skip } };
  }
  const systems = new Systems(
    {
      dir: settings.dir,
      seconds: settings.seconds,
      warmupSeconds: settings.warmupSeconds,
      connections: settings.connections,
      rounds: settings.rounds,
      peers: ['restate'],
    },
    log,
  );
  systems.prepare();
  for (const [peer, reason] of systems.skipped) {
    skipped[peer] = reason;
    log(`  PostgreSQL instances: ${peer} skipped: ${reason}`);
  }
  const instanceCounts = Array.from({ length: settings.maxInstances }, (_, index) => index + 1);
  const configs: Config[] = [
    'sqlite',
    ...instanceCounts.map((count) => `pg-${count}` as Config),
    ...(systems.skipped.has('restate') ? [] : (['restate'] as Config[])),
  ];
  const postgres = await startPostgres(found.bin);
  log(
    `PostgreSQL instances: ${configs.join(', ')}; ${settings.rounds} rounds (in order, then reversed), ${settings.connections} connections, ${settings.seconds} s after ${settings.warmupSeconds} s warm-up; PostgreSQL pid ${postgres.pid}`,
  );
  const measurements: Measurement[] = [];
  try {
    for (let round = 0; round < settings.rounds; round++) {
      for (const config of round % 2 === 0 ? configs : [...configs].reverse()) {
        const label = `pgi_${config.replace('-', '_')}_${round}_${Date.now().toString(36)}`;
        const running = config.startsWith('pg-')
          ? await startInstances(postgres, settings.dir, label, Number(config.slice(3)))
          : await systems.start(config === 'sqlite' ? 'ledger' : 'restate', label);
        let driven: Awaited<ReturnType<typeof drive>>;
        let storedLive: number | undefined;
        let database: DatabaseActivity | undefined;
        let jiffiesAtStart = machineJiffies();
        let jiffiesAtEnd = jiffiesAtStart;
        try {
          await sleep(200);
          const probe = running.parts ? await DatabaseProbe.open(postgres, label) : undefined;
          driven = await drive(running, stepJob(running, settings, label), () => {
            jiffiesAtStart = machineJiffies();
            probe?.begin();
          });
          jiffiesAtEnd = machineJiffies();
          database = await probe?.end(driven.result.steps);
          if (running.storedWhileRunning) storedLive = await running.storedWhileRunning();
        } finally {
          await running.stop();
        }
        const { result } = driven;
        // Acknowledged means stored: every step answered 2xx must be in the log once the servers have stopped.
        const stored = running.stored ? running.stored() : storedLive;
        if (result.steps === 0 || (stored !== undefined && stored < result.steps))
          throw new Error(
            `${config}: ${result.steps} steps acknowledged, ${stored ?? '?'} stored (${result.failedSteps} failed, ${JSON.stringify(result.statusCodes)})`,
          );
        const m: Measurement = {
          config,
          round,
          stepsPerSecond: result.stepsPerSecond,
          p50Ms: result.p50Ms,
          p99Ms: result.p99Ms,
          steps: result.steps,
          failed: result.failedSteps + result.errors,
          cpuMsPerStep: driven.cpuMsPerStep,
          ...(running.parts
            ? {
                ledgerCpuMsPerStep: driven.cpuMsPerStepOf.ledger,
                databaseCpuMsPerStep: driven.cpuMsPerStepOf.database,
              }
            : {}),
          loadCpuMsPerStep: result.steps > 0 ? result.loadCpuMs / result.steps : 0,
          ...(database ? { database } : {}),
          ...shares(
            jiffiesAtStart,
            jiffiesAtEnd,
            driven.cpuMsPerStep,
            result.loadCpuMs / Math.max(1, result.steps),
            result.steps,
          ),
        };
        measurements.push(m);
        log(
          `  ${config.padEnd(8)} round ${round + 1}: ${fmt(m.stepsPerSecond).padStart(6)} steps/s, p50 ${m.p50Ms.toFixed(1)} ms, p99 ${m.p99Ms.toFixed(1)} ms, ` +
            `${m.cpuMsPerStep.toFixed(2)} CPU ms/step` +
            (m.ledgerCpuMsPerStep !== undefined
              ? ` (ledger ${m.ledgerCpuMsPerStep.toFixed(2)} + database ${(m.databaseCpuMsPerStep ?? 0).toFixed(2)})`
              : '') +
            `, load ${m.loadCpuMsPerStep.toFixed(2)} CPU ms/step; machine ${(m.machineBusy * 100).toFixed(0)} % busy, this system ${(m.systemShare * 100).toFixed(0)} %, load ${(m.loadShare * 100).toFixed(0)} %; ${result.steps} acknowledged, ${stored ?? '?'} stored` +
            (m.failed > 0 ? `, ${m.failed} failed ${JSON.stringify(result.statusCodes)}` : ''),
        );
        if (database)
          log(
            `           database: ${database.commitsPerStep.toFixed(1)} commits/step, ${database.walSyncsPerCommit.toFixed(2)} WAL flushes/commit, active backends by wait ${JSON.stringify(database.activeBackendsByWait)}`,
          );
      }
    }
  } finally {
    postgres.stop();
  }

  const of = (config: Config) => measurements.filter((m) => m.config === config);
  const med = (config: Config, pick: (m: Measurement) => number | undefined) =>
    median(of(config).flatMap((m) => (pick(m) === undefined ? [] : [pick(m) as number])));
  const lines = [
    '| configuration | steps/s median (per round) | p50 / p99 ms | CPU ms/step | of which ledger / database | load generator CPU ms/step | machine busy: all / this system / load |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const config of configs) {
    if (of(config).length === 0) continue;
    const split = config.startsWith('pg-')
      ? `${med(config, (m) => m.ledgerCpuMsPerStep).toFixed(2)} / ${med(config, (m) => m.databaseCpuMsPerStep).toFixed(2)}`
      : '—';
    lines.push(
      `| ${nameOf(config)} | ${fmt(med(config, (m) => m.stepsPerSecond))} (${of(config)
        .map((m) => fmt(m.stepsPerSecond))
        .join(
          ', ',
        )}) | ${fmt(med(config, (m) => m.p50Ms))} / ${fmt(med(config, (m) => m.p99Ms))} | ${med(config, (m) => m.cpuMsPerStep).toFixed(2)} | ${split} | ${med(config, (m) => m.loadCpuMsPerStep).toFixed(2)} | ${[med(config, (m) => m.machineBusy), med(config, (m) => m.systemShare), med(config, (m) => m.loadShare)].map((v) => `${(v * 100).toFixed(0)} %`).join(' / ')} |`,
    );
  }
  for (const [peer, reason] of Object.entries(skipped)) lines.push(`| ${peer} | skipped: ${reason} | | | | | |`);

  const one = med('pg-1', (m) => m.stepsPerSecond);
  const two = med('pg-2', (m) => m.stepsPerSecond);
  // Per round: the two-instance figure over the one-instance figure of the same round.
  const perRound = of('pg-2').map(
    (m) => m.stepsPerSecond / (of('pg-1').find((o) => o.round === m.round)?.stepsPerSecond ?? NaN),
  );
  const scaling = two / one;
  const cpuTwo = med('pg-2', (m) => m.cpuMsPerStep);
  const cpuRestate = of('restate').length > 0 ? med('restate', (m) => m.cpuMsPerStep) : undefined;
  const targets = [
    `target: two instances ≥ 1.6× one: ${scaling.toFixed(2)}× (per round ${perRound.map((r) => r.toFixed(2)).join(', ')}): ${scaling >= 1.6 ? 'met' : 'not met'}`,
    cpuRestate === undefined
      ? 'target: ledger + database CPU per step ≤ Restate server + service: Restate not measured: not measured'
      : `target: ledger + database CPU per step (two instances) ≤ Restate server + service: ${cpuTwo.toFixed(2)} ms against ${cpuRestate.toFixed(2)} ms: ${cpuTwo <= cpuRestate ? 'met' : 'not met'}`,
  ];
  const text = [...lines, '', ...targets].join('\n');

  const rows: FigureRow[] = [
    {
      id: 'pg-2x',
      name: `tool steps/s, two ledger instances on one PostgreSQL against one, ${settings.connections} connections`,
      figure: { label: 'two instances', value: two, unit: 'steps/s' },
      baseline: { label: 'one instance', value: one, unit: 'steps/s' },
      ratio: scaling,
      target: { text: '≥ 1.6×', met: scaling >= 1.6 },
      details: { perRound, measurements: of('pg-1').concat(of('pg-2')) },
    },
  ];
  if (cpuRestate !== undefined)
    rows.push({
      id: 'pg-cpu',
      name: 'CPU per tool step: two ledger instances + PostgreSQL against Restate server + service',
      figure: { label: 'ledger + database', value: cpuTwo, unit: 'ms/step' },
      baseline: { label: 'Restate', value: cpuRestate, unit: 'ms/step' },
      ratio: cpuTwo / cpuRestate,
      target: { text: '≤ 1× (≤ Restate)', met: cpuTwo <= cpuRestate },
      details: { measurements: of('pg-2').concat(of('restate')) },
    });
  rows.push({
    id: 'pg-sqlite',
    name: 'tool steps/s, one ledger instance on PostgreSQL against the embedded SQLite store',
    figure: { label: 'PostgreSQL', value: one, unit: 'steps/s' },
    baseline: { label: 'SQLite', value: med('sqlite', (m) => m.stepsPerSecond), unit: 'steps/s' },
    ratio: one / med('sqlite', (m) => m.stepsPerSecond),
    details: { measurements: of('sqlite') },
  });

  mkdirSync(join(settings.chart, '..'), { recursive: true });
  const note = `${settings.rounds} rounds of ${settings.seconds} s, ${settings.connections} connections, medians; one 2-core machine shared by the load generator, the instances and the database`;
  await drawSvgAsPng(chartSvg(measurements, instanceCounts, note), settings.chart, WIDTH, HEIGHT);
  log(`  chart: ${settings.chart}`);
  return { rows, text, measurements, skipped };
}

const WIDTH = 1000;
const HEIGHT = 470;
const PANEL_W = 340;
const PANEL_H = 280;

interface Line {
  label: string;
  color: string;
  /** One value per instance count (a curve), or one value for a reference line across the panel. */
  points?: Array<[number, number]>;
  level?: number;
  dots?: Array<[number, number]>;
  dashed?: boolean;
}

function panel(title: string, unit: string, lines: Line[], counts: number[], left: number, top: number): string {
  const values = lines.flatMap((line) => [
    ...(line.points ?? []).map(([, v]) => v),
    ...(line.dots ?? []).map(([, v]) => v),
    ...(line.level === undefined ? [] : [line.level]),
  ]);
  const yMax = Math.max(...values, 0) * 1.15 || 1;
  const x = (count: number) => left + ((count - 0.5) / counts.length) * PANEL_W;
  const y = (value: number) => top + PANEL_H - (value / yMax) * PANEL_H;
  const parts = [
    ...panelFrame(title, { left, top, width: PANEL_W, height: PANEL_H }, yMax, fmt),
    `<text x="${left - 46}" y="${top + PANEL_H / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 ${left - 46} ${top + PANEL_H / 2})">${escape(unit)}</text>`,
    `<text x="${left + PANEL_W / 2}" y="${top + PANEL_H + 34}" font-size="12" text-anchor="middle">ledger instances on one PostgreSQL</text>`,
  ];
  for (const count of counts)
    parts.push(`<text x="${x(count)}" y="${top + PANEL_H + 16}" font-size="11" text-anchor="middle">${count}</text>`);
  lines.forEach((line, index) => {
    const dash = line.dashed ? ' stroke-dasharray="6 4"' : '';
    if (line.level !== undefined)
      parts.push(
        `<line x1="${left}" x2="${left + PANEL_W}" y1="${y(line.level)}" y2="${y(line.level)}" stroke="${line.color}" stroke-width="1.5"${dash}/>`,
        `<text x="${left + PANEL_W - 4}" y="${y(line.level) - 4}" font-size="11" fill="${line.color}" text-anchor="end">${fmt(line.level)}</text>`,
      );
    if (line.points)
      parts.push(
        `<polyline points="${line.points.map(([c, v]) => `${x(c)},${y(v)}`).join(' ')}" fill="none" stroke="${line.color}" stroke-width="2"${dash}/>`,
        ...line.points.map(
          ([c, v]) =>
            `<circle cx="${x(c)}" cy="${y(v)}" r="3.5" fill="${line.color}"/><text x="${x(c) + 6}" y="${y(v) - 6}" font-size="11" fill="${line.color}">${fmt(v)}</text>`,
        ),
      );
    for (const [c, v] of line.dots ?? [])
      parts.push(`<circle cx="${x(c)}" cy="${y(v)}" r="2" fill="none" stroke="${line.color}"/>`);
    const ly = top + PANEL_H + 52 + index * 15;
    parts.push(
      `<line x1="${left + 4}" x2="${left + 28}" y1="${ly}" y2="${ly}" stroke="${line.color}" stroke-width="2"${dash}/>`,
      `<text x="${left + 34}" y="${ly + 4}" font-size="11">${escape(line.label)}</text>`,
    );
  });
  return parts.join('\n');
}

function chartSvg(measurements: Measurement[], counts: number[], note: string): string {
  const of = (config: Config) => measurements.filter((m) => m.config === config);
  const curve = (pick: (m: Measurement) => number | undefined) =>
    counts
      .filter((count) => of(`pg-${count}`).length > 0)
      .map((count) => [count, median(of(`pg-${count}`).map((m) => pick(m) ?? 0))] as [number, number]);
  const dots = (pick: (m: Measurement) => number) =>
    counts.flatMap((count) => of(`pg-${count}`).map((m) => [count, pick(m)] as [number, number]));
  const level = (config: Config, pick: (m: Measurement) => number) =>
    of(config).length > 0 ? median(of(config).map(pick)) : undefined;
  const one = level('pg-1', (m) => m.stepsPerSecond);
  const throughput: Line[] = [
    {
      label: 'PostgreSQL: median, and each round (rings)',
      color: '#1f6feb',
      points: curve((m) => m.stepsPerSecond),
      dots: dots((m) => m.stepsPerSecond),
    },
    {
      label: 'embedded SQLite store, one instance',
      color: '#2da44e',
      level: level('sqlite', (m) => m.stepsPerSecond),
      dashed: true,
    },
    { label: 'Restate server + SDK', color: '#bf8700', level: level('restate', (m) => m.stepsPerSecond), dashed: true },
    ...(one === undefined
      ? []
      : [{ label: 'target for two: 1.6× one', color: '#c33', points: [[2, one * 1.6]] as Array<[number, number]> }]),
  ];
  const cpu: Line[] = [
    { label: 'ledger processes + database', color: '#1f6feb', points: curve((m) => m.cpuMsPerStep) },
    { label: 'ledger processes', color: '#8250df', points: curve((m) => m.ledgerCpuMsPerStep), dashed: true },
    { label: 'database server', color: '#57606a', points: curve((m) => m.databaseCpuMsPerStep), dashed: true },
    {
      label: 'Restate server + service',
      color: '#bf8700',
      level: level('restate', (m) => m.cpuMsPerStep),
      dashed: true,
    },
    {
      label: 'load generator (not counted above)',
      color: '#d4a72c',
      points: curve((m) => m.loadCpuMsPerStep),
      dashed: true,
    },
  ];
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" font-family="DejaVu Sans, sans-serif">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
    panel(
      'Tool steps per second',
      'steps/s',
      throughput.filter((l) => l.points || l.level !== undefined),
      counts,
      80,
      40,
    ),
    panel(
      'CPU per tool step',
      'CPU ms per step',
      cpu.filter((l) => l.points || l.level !== undefined),
      counts,
      580,
      40,
    ),
    `<text x="${WIDTH - 10}" y="${HEIGHT - 8}" font-size="11" fill="#666" text-anchor="end">${escape(note)}</text>`,
    '</svg>',
  ].join('\n');
}
