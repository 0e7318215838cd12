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
 * time to ready is the latest of the first three. Then the resident set idle (2 s after ready), and
 * when the whole-log audit behind it finished. Each probe is sent every 50 ms, one at a time.
 *
 *   npm run build && node dist/bench/restart.bench.js [--sizes 100000,1000000] [--out FILE] [--chart FILE.png]
 *   node dist/bench/restart.bench.js --redraw bench/results/restart.json --baseline bench/results/restart-before.json
 *
 * Prints every target of the restart figure with met / not met; writes the JSON (bench/results/
 * restart.json by default) and draws the chart (docs/restart-vs-log-size.png by default) with
 * Chromium when /usr/bin/chromium (or LEDGER_CHROMIUM) is there. Loopback only; data in a temporary
 * directory removed at the end (--keep keeps it). No timing is ever asserted in a test.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { rebuildInChild } from './figures/large-log.figure';
import { writeLargeLog } from './support/large-log';
import { cpuSecondsOf, rssOf, serve, LEDGER_MAIN, type Served } from './support/processes';
import { machine, writeJson } from './support/report';
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
}

function settings(argv: string[]): Settings {
  const value = (name: string) => {
    const index = argv.indexOf(`--${name}`);
    return index >= 0 ? argv[index + 1] : undefined;
  };
  const sizes = (value('sizes') ?? '100000,1000000').split(',').map(Number);
  if (sizes.some((size) => !Number.isInteger(size) || size < 10_000 || size > 50_000_000))
    throw new Error('--sizes takes comma-separated event counts from 10000 to 50000000');
  return {
    sizes,
    out: resolve(value('out') ?? join(__dirname, '../../bench/results/restart.json')),
    chart: resolve(value('chart') ?? join(__dirname, '../../docs/restart-vs-log-size.png')),
    keep: argv.includes('--keep'),
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

interface Restart {
  spawnToListenS: number;
  readsS: number;
  dispatchS: number;
  workFeedS: number;
  readyS: number;
  timeToReadyS: number;
  auditDoneS: number | null;
  idleRssMb: number;
  peakRssMb: number;
  cpuSeconds: number;
}

/** Restarts the service on `dataDir` and times each of the things an operator waits for. */
async function measureRestart(dataDir: string, tag: string): Promise<Restart> {
  const from = performance.now();
  const server = await startService(dataDir);
  const since = () => (performance.now() - from) / 1000;
  const spawnToListenS = since();
  const found: Partial<Record<'reads' | 'dispatch' | 'work' | 'ready', number>> = {};
  let n = 0;
  // A probe the service drops (a connection reset while it starts) is asked again at the next turn.
  const status = (path: string) =>
    fetch(`${server.baseUrl}${path}`).then(
      (response) => response.status,
      () => 0,
    );
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
      if (found.ready === undefined && (await status('/health/ready')) === 200) found.ready = since();
      if (Object.keys(found).length === 4) break;
    }
    if (Object.keys(found).length < 4) throw new Error(`restart ${tag}: not ready within 30 minutes`);
    await sleep(2_000);
    const idleRssMb = rssOf(server.pid).rssMb;
    let auditDoneS: number | null = null;
    for (const deadline = Date.now() + 30 * 60_000; Date.now() < deadline; await sleep(250)) {
      const ready = await readiness(server.baseUrl).catch(() => undefined);
      if (ready && ready.integrity !== 'verifying' && ready.audit !== 'running' && ready.audit !== 'not_started') {
        auditDoneS = since();
        break;
      }
    }
    const { peakMb } = rssOf(server.pid);
    return {
      spawnToListenS,
      readsS: found.reads as number,
      dispatchS: found.dispatch as number,
      workFeedS: found.work as number,
      readyS: found.ready as number,
      timeToReadyS: Math.max(found.reads as number, found.dispatch as number, found.work as number),
      auditDoneS,
      idleRssMb,
      peakRssMb: peakMb,
      cpuSeconds: cpuSecondsOf(server.pid),
    };
  } finally {
    await server.stop();
  }
}

interface SizeResult {
  events: number;
  generateS: number;
  scanRowsPerS: number;
  rebuildEventsPerS: number;
  rebuildShareOfScan: number;
  firstStartSettledS: number;
  restart: Restart;
}

async function measureSize(root: string, size: number, log: (line: string) => void): Promise<SizeResult> {
  const dataDir = join(root, `log-${size}`);
  mkdirSync(dataDir, { recursive: true });
  log(`${size.toLocaleString('en-US')} events: generating the log`);
  const written = await writeLargeLog(join(dataDir, 'events.sqlite'), size);
  log(`  ${written.events} events in ${written.seconds.toFixed(1)} s; building the read models from zero (child)`);
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
  const restart = await measureRestart(dataDir, String(size));
  log(
    `  restart: ready for reads, dispatches and the work feed in ${restart.timeToReadyS.toFixed(2)} s, /health/ready at ${restart.readyS.toFixed(2)} s, audit done at ${restart.auditDoneS?.toFixed(1) ?? '—'} s, idle RSS ${restart.idleRssMb.toFixed(0)} MB`,
  );
  return {
    events: written.events,
    generateS: written.seconds,
    scanRowsPerS,
    rebuildEventsPerS,
    rebuildShareOfScan: rebuildEventsPerS / scanRowsPerS,
    firstStartSettledS,
    restart,
  };
}

interface TargetLine {
  text: string;
  measured: string;
  met: boolean;
}

function targets(results: SizeResult[]): TargetLine[] {
  const lines: TargetLine[] = [];
  const first = results[0];
  const last = results[results.length - 1];
  for (const result of results) {
    const label = `${result.events.toLocaleString('en-US')} events`;
    lines.push({
      text: `time to ready ≤ 2 s at ${label}`,
      measured: `${result.restart.timeToReadyS.toFixed(2)} s`,
      met: result.restart.timeToReadyS <= 2,
    });
    lines.push({
      text: `idle RSS < 250 MB at ${label}`,
      measured: `${result.restart.idleRssMb.toFixed(0)} MB`,
      met: result.restart.idleRssMb < 250,
    });
    lines.push({
      text: `rebuild ≥ 40 % of a plain ordered scan at ${label}`,
      measured: `${(result.rebuildShareOfScan * 100).toFixed(1)} %`,
      met: result.rebuildShareOfScan >= 0.4,
    });
  }
  if (results.length > 1) {
    const ratio = last.restart.timeToReadyS / first.restart.timeToReadyS;
    lines.push({
      text: `time to ready ${last.events.toLocaleString('en-US')} / ${first.events.toLocaleString('en-US')} ≤ 1.5`,
      measured: `${ratio.toFixed(2)}× (log ${(last.events / first.events).toFixed(0)}×)`,
      met: ratio <= 1.5,
    });
    const rss = last.restart.idleRssMb / first.restart.idleRssMb;
    lines.push({
      text: `idle RSS ${last.events.toLocaleString('en-US')} / ${first.events.toLocaleString('en-US')} (flat)`,
      measured: `${rss.toFixed(2)}×`,
      met: rss <= 1.2,
    });
  }
  return lines;
}

function pointsOf(results: SizeResult[]): RestartPoint[] {
  return results.map((result) => ({
    events: result.events,
    timeToReadyS: result.restart.timeToReadyS,
    idleRssMb: result.restart.idleRssMb,
    rebuildEventsPerS: result.rebuildEventsPerS,
    scanRowsPerS: result.scanRowsPerS,
  }));
}

const readRun = (file: string) =>
  JSON.parse(readFileSync(file, 'utf8')) as { machine: { date: string; nproc: number }; results: SizeResult[] };

async function draw(options: Settings, results: SizeResult[], date: string, nproc: number): Promise<void> {
  if (!existsSync(process.env.LEDGER_CHROMIUM ?? '/usr/bin/chromium')) {
    process.stderr.write('no Chromium: the chart is not drawn\n');
    return;
  }
  const baseline = options.baseline ? pointsOf(readRun(options.baseline).results) : undefined;
  await drawRestartChart(
    pointsOf(results),
    options.chart,
    `measured ${date.slice(0, 16)} UTC, ${nproc} cores`,
    baseline,
  );
  process.stderr.write(`drew ${options.chart}\n`);
}

async function main(): Promise<void> {
  const options = settings(process.argv.slice(2));
  if (options.redraw) {
    const run = readRun(options.redraw);
    await draw(options, run.results, run.machine.date, run.machine.nproc);
    return;
  }
  const root = mkdtempSync(join(tmpdir(), 'ledger-restart-'));
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const host = machine();
  log(
    `restart bench: ${host.nproc} cores, ${host.memory}, node ${host.node}, load ${host.loadAverageAtStart.join(' ')}`,
  );
  const results: SizeResult[] = [];
  try {
    for (const size of options.sizes) {
      results.push(await measureSize(root, size, log));
      // Each size's files go once measured: a 10 M log is several GB.
      if (!options.keep) rmSync(join(root, `log-${size}`), { recursive: true, force: true });
    }
  } finally {
    if (!options.keep) rmSync(root, { recursive: true, force: true });
  }
  const lines = targets(results);
  process.stdout.write('\nrestart against the log size\n');
  for (const result of results)
    process.stdout.write(
      `  ${result.events.toLocaleString('en-US').padStart(12)} events: reads ${result.restart.readsS.toFixed(2)} s, dispatch ${result.restart.dispatchS.toFixed(2)} s, work feed ${result.restart.workFeedS.toFixed(2)} s, /health/ready ${result.restart.readyS.toFixed(2)} s, audit done ${result.restart.auditDoneS?.toFixed(1) ?? '—'} s; RSS idle ${result.restart.idleRssMb.toFixed(0)} MB, peak ${result.restart.peakRssMb.toFixed(0)} MB; rebuild ${Math.round(result.rebuildEventsPerS)} events/s (${(result.rebuildShareOfScan * 100).toFixed(1)} % of a scan)\n`,
    );
  for (const line of lines)
    process.stdout.write(`  ${line.met ? 'met    ' : 'NOT MET'}  ${line.text}: ${line.measured}\n`);
  writeJson(options.out, {
    machine: { ...host, loadAverageAtEnd: loadavg().map((value) => Number(value.toFixed(2))) },
    results,
    targets: lines,
  });
  log(`wrote ${options.out}`);
  await draw(options, results, host.date, host.nproc);
}

main().catch((error: unknown) => {
  process.stderr.write(`${String((error as Error).stack ?? error)}\n`);
  process.exit(1);
});
