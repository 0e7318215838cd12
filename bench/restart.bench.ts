/**
 * What a restart costs against the size of the log (docs/performance.md, "Restart against the log's
 * size"; docs/scaling.md). For each size: a valid log is generated as figures 5–7 do
 * (support/large-log.ts), the projection engine builds its read models from zero in a child process
 * (the rebuild rate, beside a plain ordered scan of the same table), the built service is started on it
 * once and left to finish every start-up check (the log anchored, audited and checkpointed, the read
 * models checked), stopped with SIGTERM, and started again. The second start is what is measured, from
 * the spawn of the process:
 *   - reads answered: `GET /v1/operations` (a read model read) answers 200;
 *   - dispatches granted: a new step is planned, then dispatched, both answered `appended`;
 *   - the work feed serving: `GET /v1/work` answers 200;
 *   - `/health/ready` answers 200;
 * time to ready is the latest of the first three, and what the start read by then is taken from the
 * service's metrics. Then the resident set idle (2 s after ready), and when the whole-log audit
 * behind it finished; then figure 6 on that service (the evidence trail idle, then figure 1's load
 * with the lag probes and the evidence trail read while it runs, and the peak resident set of just
 * that: figures/large-log.figure.ts). That service is then killed (SIGKILL) and the start after the
 * crash is timed the same way. Each probe is sent every 50 ms, one at a time. Before the sizes, a
 * decision's cost on a step's 10th event and on its 10,000th (figures/decision-cost.figure.ts), and
 * whether a projection's raised version is rebuilt beside its live rows, on a log of --bump-events
 * events (figures/version-bump.figure.ts).
 *
 *   npm run build && node dist/bench/restart.bench.js [--sizes 100000,1000000] [--out FILE] [--chart FILE.png]
 *     [--seconds 10] [--warmup 5] [--connections 50]   (figure 1's load on the restarted service)
 *     [--bump-events 100000]
 *   node dist/bench/restart.bench.js --only version-bump [--bump-events 100000]   (that figure alone, printed)
 *   node dist/bench/restart.bench.js --redraw bench/results/restart.json --baseline bench/results/restart-before.json
 *
 * Prints every target of docs/performance.md's "Restart against the log's size" as MET, NOT MET,
 * NOT MEASURED (no run at that size) or NOT BUILT; writes the JSON (bench/results/
 * restart.json by default) and draws the chart (docs/restart-vs-log-size.png by default) with
 * Chromium when /usr/bin/chromium (or LEDGER_CHROMIUM) is there. Loopback only; data in a temporary
 * directory removed at the end (--keep keeps it). No timing is ever asserted in a test.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { decisionCostFigure, type DecisionCost } from './figures/decision-cost.figure';
import { versionBumpFigure, type VersionBump } from './figures/version-bump.figure';
import { LONG_EVENTS, LONG_REF, rebuildInChild, serviceUnderLoad, type UnderLoad } from './figures/large-log.figure';
import { writeLargeLog, writeLongOperation } from './support/large-log';
import { cpuSecondsOf, rssOf, serve, LEDGER_MAIN, type Served } from './support/processes';
import { machine, percentile, writeJson } from './support/report';
import { SNAPSHOT_EVERY } from '../src/ledger/sealed-streams';
import { benchUuid, dispatchFact, INPUT_HASH, submitPath } from './support/submit-bodies';
import { drawRestartChart, type RestartPoint } from './support/restart-chart';

interface Settings {
  sizes: number[];
  out: string;
  chart: string;
  keep: boolean;
  /** An earlier run's JSON, drawn beside this one as the baseline. */
  baseline?: string;
  /** Draw the chart from this run's JSON instead of measuring again. */
  redraw?: string;
  /** The version-bump figure alone: printed, nothing written or drawn. */
  onlyVersionBump: boolean;
  bumpEvents: number;
  /** Figure 1's load on the restarted service (figure 6): its length, warm-up and connections. */
  load: { seconds: number; warmupSeconds: number; connections: number };
}

function settings(argv: string[]): Settings {
  const value = (name: string) => {
    const index = argv.indexOf(`--${name}`);
    return index >= 0 ? argv[index + 1] : undefined;
  };
  const bounded = (name: string, fallback: number, min: number, max: number) => {
    const parsed = Number(value(name) ?? fallback);
    if (!Number.isInteger(parsed) || parsed < min || parsed > max)
      throw new Error(`--${name} takes a whole number from ${min} to ${max}`);
    return parsed;
  };
  const sizes = (value('sizes') ?? '100000,1000000').split(',').map(Number);
  if (sizes.some((size) => !Number.isInteger(size) || size < 10_000 || size > 50_000_000))
    throw new Error('--sizes takes comma-separated event counts from 10000 to 50000000');
  return {
    sizes,
    out: resolve(value('out') ?? join(__dirname, '../../bench/results/restart.json')),
    chart: resolve(value('chart') ?? join(__dirname, '../../docs/restart-vs-log-size.png')),
    keep: argv.includes('--keep'),
    onlyVersionBump: value('only') === 'version-bump',
    bumpEvents: bounded('bump-events', 100_000, 1_000, 10_000_000),
    load: {
      seconds: bounded('seconds', 10, 1, 120),
      warmupSeconds: bounded('warmup', 5, 0, 60),
      connections: bounded('connections', 50, 1, 500),
    },
    ...(value('baseline') ? { baseline: resolve(value('baseline') as string) } : {}),
    ...(value('redraw') ? { redraw: resolve(value('redraw') as string) } : {}),
  };
}

/** The service as `npm start` runs it, answered as soon as it listens (nothing else waited for). */
function startService(dataDir: string): Promise<Served> {
  return serve(
    LEDGER_MAIN,
    {
      LEDGER_DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      LEDGER_RATE_LIMIT_PER_MINUTE: '10000000',
      // The default head witness, beside the data and removed with it (not in the user's state directory).
      XDG_STATE_HOME: join(dataDir, '..', 'state'),
    },
    async (baseUrl) => (await fetch(`${baseUrl}/health/live`)).ok,
  );
}

interface Readiness {
  ready: { status: number; integrity?: string; audit?: string };
}

async function readiness(baseUrl: string): Promise<Readiness['ready']> {
  const response = await fetch(`${baseUrl}/health/ready`);
  const body = (await response.json().catch(() => ({}))) as {
    details?: { integrity?: { state?: string; audit?: { state?: string } } };
    info?: { integrity?: { state?: string; audit?: { state?: string } } };
  };
  const integrity = body.details?.integrity ?? body.info?.integrity;
  return { status: response.status, integrity: integrity?.state, audit: integrity?.audit?.state };
}

/** Waits (bounded) until the service is ready and no audit or check runs behind it. */
async function settle(baseUrl: string, minutes: number): Promise<void> {
  for (const deadline = Date.now() + minutes * 60_000; Date.now() < deadline; await sleep(250)) {
    const ready = await readiness(baseUrl).catch(() => undefined);
    if (
      ready?.status === 200 &&
      ready.integrity !== 'verifying' &&
      ready.audit !== 'running' &&
      ready.audit !== 'not_started'
    )
      return;
  }
  throw new Error(`the service did not settle within ${minutes} minutes`);
}

async function submit(baseUrl: string, ref: string, facts: unknown[]): Promise<boolean> {
  const response = await fetch(`${baseUrl}${submitPath(ref)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ events: facts }),
  }).catch(() => undefined);
  if (!response) return false;
  const body = (await response.json().catch(() => ({}))) as { results?: Array<{ status?: string }> };
  return response.ok && (body.results ?? []).every((result) => result.status !== 'refused');
}

/** A counter or gauge from the service's Prometheus exposition, or null when it is not there. */
async function metric(baseUrl: string, name: string): Promise<number | null> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const found = new RegExp(`^${name} (\\S+)`, 'm').exec(text);
  return found ? Number(found[1]) : null;
}

interface Restart {
  spawnToListenS: number;
  readsS: number;
  dispatchS: number;
  workFeedS: number;
  readyS: number;
  timeToReadyS: number;
  /** Events the store decoded from the process start until reads, dispatches and the work feed answered. */
  eventsReadAtReady: number | null;
  /** Events the start-up integrity check read (those after the last verified checkpoint). */
  startCheckEventsRead: number | null;
  auditDoneS: number | null;
  idleRssMb: number;
  /** The peak resident set up to the end of the whole-log audit (when waited for), else up to ready + 2 s. */
  peakRssMb: number;
  cpuSeconds: number;
}

interface RestartOptions<T> {
  /** Waits (bounded) for the whole-log audit behind the service to finish before `then`. */
  waitForAudit: boolean;
  /** Runs on the restarted service once it is measured; what it answers is kept. */
  then?: (server: Served) => Promise<T>;
  /** Ends the service with SIGKILL (a crash) instead of SIGTERM (a clean stop). */
  crash?: boolean;
}

/** Restarts the service on `dataDir` and times each of the things an operator waits for. */
async function measureRestart<T>(
  dataDir: string,
  tag: string,
  options: RestartOptions<T>,
): Promise<{ restart: Restart; then?: T }> {
  const from = performance.now();
  const server = await startService(dataDir);
  const since = () => (performance.now() - from) / 1000;
  const spawnToListenS = since();
  const found: Partial<Record<'reads' | 'dispatch' | 'work' | 'ready', number>> = {};
  let n = 0;
  let eventsReadAtReady: number | null = null;
  // A probe the service drops (a connection reset while it starts) is asked again at the next turn.
  const status = (path: string) =>
    fetch(`${server.baseUrl}${path}`).then(
      (response) => response.status,
      () => 0,
    );
  let crashed = false;
  try {
    for (const deadline = Date.now() + 30 * 60_000; Date.now() < deadline; await sleep(50)) {
      if (found.reads === undefined && (await status('/v1/operations?limit=1')) === 200) found.reads = since();
      if (found.dispatch === undefined) {
        const ref = `restart_${tag}/op_${n}`;
        const planned = await submit(server.baseUrl, ref, [
          {
            event_id: benchUuid(`restart_${tag}`, n),
            type: 'StepPlanned',
            data: {
              run_id: `restart_${tag}_run`,
              tool: 'create_invoice',
              side_effect: 'write',
              input_hash: INPUT_HASH,
            },
          },
        ]);
        if (planned && (await submit(server.baseUrl, ref, [dispatchFact(`restart_${tag}`, n)])))
          found.dispatch = since();
        n += 1;
      }
      if (found.work === undefined && (await status('/v1/work?worker=bench&tool=send_email&limit=1&wait_ms=0')) === 200)
        found.work = since();
      // Counted as soon as reads, dispatches and the work feed answer: what was read to get there.
      if (
        eventsReadAtReady === null &&
        found.reads !== undefined &&
        found.dispatch !== undefined &&
        found.work !== undefined
      )
        eventsReadAtReady = await metric(server.baseUrl, 'ledger_store_events_read_total');
      if (found.ready === undefined && (await status('/health/ready')) === 200) found.ready = since();
      if (Object.keys(found).length === 4) break;
    }
    if (Object.keys(found).length < 4) throw new Error(`restart ${tag}: not ready within 30 minutes`);
    const startCheckEventsRead = await metric(server.baseUrl, 'ledger_integrity_start_check_events_read');
    await sleep(2_000);
    const idleRssMb = rssOf(server.pid).rssMb;
    let auditDoneS: number | null = null;
    if (options.waitForAudit)
      for (const deadline = Date.now() + 30 * 60_000; Date.now() < deadline; await sleep(250)) {
        const ready = await readiness(server.baseUrl).catch(() => undefined);
        if (ready && ready.integrity !== 'verifying' && ready.audit !== 'running' && ready.audit !== 'not_started') {
          auditDoneS = since();
          break;
        }
      }
    const { peakMb } = rssOf(server.pid);
    const cpuSeconds = cpuSecondsOf(server.pid);
    const then = options.then ? await options.then(server) : undefined;
    if (options.crash) {
      server.child.kill('SIGKILL');
      crashed = true;
    }
    return {
      restart: {
        spawnToListenS,
        readsS: found.reads as number,
        dispatchS: found.dispatch as number,
        workFeedS: found.work as number,
        readyS: found.ready as number,
        timeToReadyS: Math.max(found.reads as number, found.dispatch as number, found.work as number),
        eventsReadAtReady,
        startCheckEventsRead,
        auditDoneS,
        idleRssMb,
        peakRssMb: peakMb,
        cpuSeconds,
      },
      ...(then !== undefined ? { then } : {}),
    };
  } finally {
    if (!crashed) await server.stop();
    else
      await new Promise<void>((done) =>
        server.child.exitCode !== null || server.child.signalCode !== null
          ? done()
          : server.child.once('exit', () => done()),
      );
  }
}

/** Figure 6's measures on the restarted service, kept as numbers. */
interface LoadFigures {
  lagP50Ms: number;
  lagP99Ms: number;
  probes: number;
  /** The service's own commit → readable histogram: the bucket bound its p99 falls under. */
  insideLagP99AtMostMs: number;
  evidenceIdleP99Ms: number;
  evidenceUnderLoadP50Ms: number;
  evidenceUnderLoadP99Ms: number;
  evidenceReads: number;
  loadRps: number;
  loadNon2xx: number;
  peakRssUnderLoadMb: number;
}

function loadFigures(under: UnderLoad): LoadFigures {
  return {
    lagP50Ms: percentile(under.lags, 0.5),
    lagP99Ms: percentile(under.lags, 0.99),
    probes: under.lags.length,
    insideLagP99AtMostMs: under.inside.bounds[1] * 1000,
    evidenceIdleP99Ms: under.evidence.latencyMs.p99,
    evidenceUnderLoadP50Ms: percentile(under.evidenceUnderLoad, 0.5),
    evidenceUnderLoadP99Ms: percentile(under.evidenceUnderLoad, 0.99),
    evidenceReads: under.evidenceUnderLoad.length,
    loadRps: under.load.rps,
    loadNon2xx: under.load.non2xx,
    peakRssUnderLoadMb: under.peakMb,
  };
}

interface SizeResult {
  events: number;
  generateS: number;
  scanRowsPerS: number;
  rebuildEventsPerS: number;
  rebuildShareOfScan: number;
  firstStartSettledS: number;
  /** After a clean stop (SIGTERM), waited through the whole-log audit, then figure 1's load. */
  restart: Restart;
  underLoad: LoadFigures;
  /** After that service was killed (SIGKILL) at the end of the load. */
  afterCrash: Restart;
}

async function measureSize(
  root: string,
  size: number,
  load: Settings['load'],
  log: (line: string) => void,
): Promise<SizeResult> {
  const dataDir = join(root, `log-${size}`);
  mkdirSync(dataDir, { recursive: true });
  log(`${size.toLocaleString('en-US')} events: generating the log`);
  const file = join(dataDir, 'events.sqlite');
  const written = await writeLargeLog(file, size - LONG_EVENTS);
  // An operation with a long history, whose evidence trail figure 6 reads.
  const longEvents = await writeLongOperation(file, LONG_REF, LONG_EVENTS);
  const events = written.events + longEvents;
  log(`  ${events} events in ${written.seconds.toFixed(1)} s; building the read models from zero (child)`);
  const { result } = await rebuildInChild(dataDir);
  const scanRowsPerS = result.scan.rows / (result.scan.ms / 1000);
  const rebuildEventsPerS = result.rebuild.events / (result.rebuild.ms / 1000);
  log(`  scan ${Math.round(scanRowsPerS)} rows/s, rebuild ${Math.round(rebuildEventsPerS)} events/s; first start`);
  const first = performance.now();
  const server = await startService(dataDir);
  try {
    await settle(server.baseUrl, 60);
  } finally {
    await server.stop();
  }
  const firstStartSettledS = (performance.now() - first) / 1000;
  log(`  first start settled in ${firstStartSettledS.toFixed(1)} s; restarting`);
  const measured = await measureRestart(dataDir, String(size), {
    waitForAudit: true,
    then: (served) => serviceUnderLoad(served, LONG_REF, load),
    crash: true,
  });
  const restart = measured.restart;
  const underLoad = loadFigures(measured.then as UnderLoad);
  log(
    `  restart: ready for reads, dispatches and the work feed in ${restart.timeToReadyS.toFixed(2)} s (${restart.eventsReadAtReady ?? '?'} events read), /health/ready at ${restart.readyS.toFixed(2)} s, audit done at ${restart.auditDoneS?.toFixed(1) ?? '—'} s, idle RSS ${restart.idleRssMb.toFixed(0)} MB; under load: lag p99 ${underLoad.lagP99Ms.toFixed(1)} ms, evidence p99 ${underLoad.evidenceUnderLoadP99Ms.toFixed(1)} ms, peak RSS ${underLoad.peakRssUnderLoadMb.toFixed(0)} MB; killed`,
  );
  const { restart: afterCrash } = await measureRestart(dataDir, `${size}_crash`, { waitForAudit: false });
  log(
    `  after the crash: ready in ${afterCrash.timeToReadyS.toFixed(2)} s (${afterCrash.eventsReadAtReady ?? '?'} events read, start check ${afterCrash.startCheckEventsRead ?? '?'})`,
  );
  return {
    events,
    generateS: written.seconds,
    scanRowsPerS,
    rebuildEventsPerS,
    rebuildShareOfScan: rebuildEventsPerS / scanRowsPerS,
    firstStartSettledS,
    restart,
    underLoad,
    afterCrash,
  };
}

type Status = 'met' | 'not met' | 'not measured' | 'not built';

interface TargetLine {
  /** The target of docs/performance.md ("Restart against the log's size") the line is about. */
  target: string;
  text: string;
  measured: string;
  status: Status;
  met: boolean;
}

/** The sizes the targets name: time to ready, memory and rebuild are to hold at each. */
const TARGET_SIZES = [100_000, 1_000_000, 10_000_000];
const count = (value: number) => value.toLocaleString('en-US');

function bumpLine(bump: VersionBump): string {
  return `${count(bump.rowsServed)} of ${count(bump.rowsBefore)} rows of ${bump.projection} answered (by version ${bump.versionsServedDuringBuild.join(', ') || '—'}) in each of ${bump.passesDuringBuild} passes while version ${bump.versionAfter} was built beside from ${count(bump.events)} events (${bump.buildS.toFixed(1)} s; at most ${bump.eventsBehindDuringBuild ?? '?'} events behind); after the swap ${count(bump.rowsServedAfter)} answered by version ${bump.versionAfter}`;
}
const sizeLabel = (events: number) => (events >= 1e6 ? `${events / 1e6} M` : `${events / 1e3} k`);

function targets(
  results: SizeResult[],
  decision: DecisionCost,
  bump: VersionBump,
  snapshotEvery: number,
): TargetLine[] {
  const lines: TargetLine[] = [];
  const add = (target: string, text: string, measured: string, met: boolean | Status) => {
    const status: Status = typeof met === 'boolean' ? (met ? 'met' : 'not met') : met;
    lines.push({ target, text, measured, status, met: status === 'met' });
  };
  // A generated log is the size asked for: a target size is measured when a run of that size is here.
  const at = (size: number) => results.find((result) => Math.abs(result.events - size) / size < 0.01);
  const missing = TARGET_SIZES.filter((size) => !at(size));

  const ready = 'time to ready does not grow with the log';
  for (const result of results) {
    const label = `${count(result.events)} events`;
    add(
      ready,
      `≤ 2 s at ${label}, after a clean stop`,
      `${result.restart.timeToReadyS.toFixed(2)} s`,
      result.restart.timeToReadyS <= 2,
    );
    add(
      ready,
      `≤ 2 s at ${label}, after a crash (SIGKILL)`,
      `${result.afterCrash.timeToReadyS.toFixed(2)} s`,
      result.afterCrash.timeToReadyS <= 2,
    );
  }
  for (const size of missing) add(ready, `≤ 2 s at ${count(size)} events`, 'no run at this size', 'not measured');
  const small = at(100_000);
  const large = at(10_000_000);
  if (small && large) {
    const ratio = large.restart.timeToReadyS / small.restart.timeToReadyS;
    add(ready, '10 M / 100 k ≤ 1.5', `${ratio.toFixed(2)}×`, ratio <= 1.5);
  } else add(ready, '10 M / 100 k ≤ 1.5', 'no 10 M run', 'not measured');
  if (results.length > 1) {
    const [first, last] = [results[0], results[results.length - 1]];
    for (const [how, of] of [
      ['clean stop', (result: SizeResult) => result.restart.timeToReadyS],
      ['crash', (result: SizeResult) => result.afterCrash.timeToReadyS],
    ] as const) {
      const ratio = of(last) / of(first);
      add(
        ready,
        `${sizeLabel(last.events)} / ${sizeLabel(first.events)} ≤ 1.5, after a ${how}`,
        `${ratio.toFixed(2)}× (log ${(last.events / first.events).toFixed(0)}×)`,
        ratio <= 1.5,
      );
    }
  }

  const integrity = 'integrity without a full pass at start';
  for (const result of results)
    for (const [how, restart] of [
      ['clean stop', result.restart],
      ['crash', result.afterCrash],
    ] as const) {
      // The start-up check reads what followed the last verified checkpoint: nothing after a clean stop
      // (which checkpoints the head), the tail appended since the last checkpoint after a crash.
      const checked = restart.startCheckEventsRead;
      const bound = how === 'clean stop' ? result.events / 100 : result.events;
      add(
        integrity,
        `start-up check reads ${how === 'clean stop' ? '< 1 % of the log' : 'less than a full pass'} (${count(result.events)} events), after a ${how}`,
        `${checked === null ? '?' : count(checked)} events`,
        checked !== null && checked < bound,
      );
    }
  for (const result of results)
    add(
      integrity,
      `ready before the whole-log audit ends (audit paced behind), ${count(result.events)} events`,
      `ready ${result.restart.timeToReadyS.toFixed(2)} s, audit done ${result.restart.auditDoneS?.toFixed(1) ?? '—'} s`,
      result.restart.auditDoneS === null ? 'not measured' : result.restart.timeToReadyS < result.restart.auditDoneS,
    );

  const readModels = 'read models are not rebuilt to be checked';
  for (const result of results)
    for (const [how, restart] of [
      ['clean stop', result.restart],
      ['crash', result.afterCrash],
    ] as const) {
      // A rebuild (or the whole-log audit) reads every event; less than one full pass by ready means neither blocked it.
      const read = restart.eventsReadAtReady;
      add(
        readModels,
        `events read by ready < one full pass (${count(result.events)}), after a ${how}`,
        read === null ? '?' : `${count(read)} (${((read / result.events) * 100).toFixed(1)} %)`,
        read !== null && read < result.events,
      );
    }

  add(
    readModels,
    `a projection's new version is rebuilt beside: its rows still answered until the swap`,
    bumpLine(bump),
    bump.rowsBefore > 0 &&
      bump.passesDuringBuild > 0 &&
      bump.rowsServed === bump.rowsBefore &&
      bump.rowsServedAfter === bump.rowsBefore,
  );

  const memory = 'memory flat';
  for (const result of results) {
    const label = `${count(result.events)} events`;
    add(
      memory,
      `idle RSS < 250 MB at ${label}`,
      `${result.restart.idleRssMb.toFixed(0)} MB`,
      result.restart.idleRssMb < 250,
    );
    add(
      memory,
      `idle RSS < 250 MB after a crash at ${label} (the read model's digest checked, the audit behind)`,
      `${result.afterCrash.idleRssMb.toFixed(0)} MB (peak ${result.afterCrash.peakRssMb.toFixed(0)} MB)`,
      result.afterCrash.idleRssMb < 250,
    );
    add(
      memory,
      `peak RSS < 300 MB under figure 1's load at ${label}`,
      `${result.underLoad.peakRssUnderLoadMb.toFixed(0)} MB`,
      result.underLoad.peakRssUnderLoadMb < 300,
    );
    add(
      memory,
      `peak RSS < 300 MB through the whole-log audit at ${label}`,
      `${result.restart.peakRssMb.toFixed(0)} MB`,
      result.restart.peakRssMb < 300,
    );
  }
  for (const size of missing) add(memory, `RSS at ${count(size)} events`, 'no run at this size', 'not measured');

  add(
    'a decision costs the same on the 10th event and the 10,000th',
    `median time ratio ≤ 1.5 and at most ${snapshotEvery + 1} events read (${decision.decisions} decisions each; the long step's at revisions ${decision.late.revisions.join('–')}, from 0)`,
    `${decision.late.medianMs.toFixed(3)} ms / ${decision.early.medianMs.toFixed(3)} ms = ${decision.ratio.toFixed(2)}×; events read ${decision.late.maxEventsRead} / ${decision.early.maxEventsRead}`,
    decision.ratio <= 1.5 && decision.late.maxEventsRead <= snapshotEvery + 1,
  );

  for (const result of results)
    add(
      'rebuild ≥ 40 % of a plain ordered scan',
      `at ${count(result.events)} events`,
      `${(result.rebuildShareOfScan * 100).toFixed(1)} % (${Math.round(result.rebuildEventsPerS)} of ${Math.round(result.scanRowsPerS)} events/s)`,
      result.rebuildShareOfScan >= 0.4,
    );

  const load = "lag and evidence under figure 1's load";
  for (const result of results) {
    const label = `${count(result.events)} events`;
    const under = result.underLoad;
    add(
      load,
      `projection lag p99 < 20 ms at ${label}`,
      `${under.lagP99Ms.toFixed(1)} ms (${under.probes} probes; inside the service ≤ ${under.insideLagP99AtMostMs} ms)`,
      under.probes > 0 && under.lagP99Ms < 20,
    );
    add(
      load,
      `evidence trail p99 < 5 ms at ${label}`,
      `${under.evidenceUnderLoadP99Ms.toFixed(1)} ms (${under.evidenceReads} reads; idle ${under.evidenceIdleP99Ms} ms)`,
      under.evidenceReads > 0 && under.evidenceUnderLoadP99Ms < 5,
    );
  }

  // The EventStoreDB adapter keeps no anchors or checkpoints (docs/eventstoredb.md): nothing to measure.
  add(
    'the same on EventStoreDB',
    'checkpoints at $all positions, in its contract suite',
    'the adapter keeps none',
    'not built',
  );
  return lines;
}

function pointsOf(results: SizeResult[]): RestartPoint[] {
  return results.map((result) => ({
    events: result.events,
    timeToReadyS: result.restart.timeToReadyS,
    idleRssMb: result.restart.idleRssMb,
    rebuildEventsPerS: result.rebuildEventsPerS,
    scanRowsPerS: result.scanRowsPerS,
    // Runs measured before the load was run on the restarted service have none.
    ...((result as Partial<SizeResult>).underLoad
      ? { loadPeakRssMb: result.underLoad.peakRssUnderLoadMb, crashTimeToReadyS: result.afterCrash.timeToReadyS }
      : {}),
  }));
}

const readRun = (file: string) =>
  JSON.parse(readFileSync(file, 'utf8')) as {
    machine: { date: string; nproc: number; loadAverageAtStart?: number[] };
    results: SizeResult[];
  };

async function draw(
  options: Settings,
  results: SizeResult[],
  host: { date: string; nproc: number; loadAverageAtStart?: number[] },
): Promise<void> {
  if (!existsSync(process.env.LEDGER_CHROMIUM ?? '/usr/bin/chromium')) {
    process.stderr.write('no Chromium: the chart is not drawn\n');
    return;
  }
  const baseline = options.baseline ? pointsOf(readRun(options.baseline).results) : undefined;
  await drawRestartChart(
    pointsOf(results),
    options.chart,
    `measured ${host.date.slice(0, 16)} UTC, ${host.nproc} cores${host.loadAverageAtStart ? `, load average ${host.loadAverageAtStart[0]} at the start` : ''}`,
    baseline,
  );
  process.stderr.write(`drew ${options.chart}\n`);
}

async function main(): Promise<void> {
  const options = settings(process.argv.slice(2));
  if (options.redraw) {
    const run = readRun(options.redraw);
    await draw(options, run.results, run.machine);
    return;
  }
  const root = mkdtempSync(join(tmpdir(), 'ledger-restart-'));
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const host = machine();
  log(
    `restart bench: ${host.nproc} cores, ${host.memory}, node ${host.node}, load ${host.loadAverageAtStart.join(' ')}`,
  );
  const revision = (() => {
    try {
      const commit = execFileSync('git', ['rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
      const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim();
      return { commit, dirty: dirty.length > 0 };
    } catch {
      return undefined;
    }
  })();
  if (options.onlyVersionBump) {
    try {
      const bump = await versionBumpFigure(root, options.bumpEvents);
      process.stdout.write(`${JSON.stringify(bump, null, 2)}\n${bumpLine(bump)}\n`);
    } finally {
      if (!options.keep) rmSync(root, { recursive: true, force: true });
    }
    return;
  }
  const results: SizeResult[] = [];
  let decision: DecisionCost;
  let bump: VersionBump;
  try {
    log("a decision on a step's 10th event and on its 10,000th");
    decision = await decisionCostFigure(root);
    log(
      `  10th: median ${decision.early.medianMs.toFixed(3)} ms, ${decision.early.maxEventsRead} events read; 10,000th: median ${decision.late.medianMs.toFixed(3)} ms, ${decision.late.maxEventsRead} events read`,
    );
    bump = await versionBumpFigure(root, options.bumpEvents);
    log(`  a version raised: ${bumpLine(bump)}`);
    for (const size of options.sizes) {
      results.push(await measureSize(root, size, options.load, log));
      // Each size's files go once measured: a 10 M log is several GB.
      if (!options.keep) rmSync(join(root, `log-${size}`), { recursive: true, force: true });
    }
  } finally {
    if (!options.keep) rmSync(root, { recursive: true, force: true });
  }
  const lines = targets(results, decision, bump, SNAPSHOT_EVERY);
  process.stdout.write('\nrestart against the log size\n');
  for (const result of results)
    process.stdout.write(
      `  ${count(result.events).padStart(12)} events: reads ${result.restart.readsS.toFixed(2)} s, dispatch ${result.restart.dispatchS.toFixed(2)} s, work feed ${result.restart.workFeedS.toFixed(2)} s, /health/ready ${result.restart.readyS.toFixed(2)} s, audit done ${result.restart.auditDoneS?.toFixed(1) ?? '—'} s; after a crash ready ${result.afterCrash.timeToReadyS.toFixed(2)} s; RSS idle ${result.restart.idleRssMb.toFixed(0)} MB, peak through the audit ${result.restart.peakRssMb.toFixed(0)} MB, under load ${result.underLoad.peakRssUnderLoadMb.toFixed(0)} MB; rebuild ${Math.round(result.rebuildEventsPerS)} events/s (${(result.rebuildShareOfScan * 100).toFixed(1)} % of a scan)\n`,
    );
  process.stdout.write('\nthe targets, met or not\n');
  let heading = '';
  for (const line of lines) {
    if (line.target !== heading) process.stdout.write(`  ${(heading = line.target)}\n`);
    process.stdout.write(`    ${line.status.toUpperCase().padEnd(12)}  ${line.text}: ${line.measured}\n`);
  }
  process.stdout.write(
    `  ${lines.filter((line) => line.met).length} of ${lines.length} lines met; load average at the end ${loadavg()
      .map((value) => value.toFixed(2))
      .join(' ')}\n`,
  );
  writeJson(options.out, {
    machine: { ...host, loadAverageAtEnd: loadavg().map((value) => Number(value.toFixed(2))) },
    revision,
    settings: { sizes: options.sizes, load: options.load },
    decision,
    versionBump: bump,
    results,
    targets: lines,
  });
  log(`wrote ${options.out}`);
  await draw(options, results, host);
}

main().catch((error: unknown) => {
  process.stderr.write(`${String((error as Error).stack ?? error)}\n`);
  process.exit(1);
});
