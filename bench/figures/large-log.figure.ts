/**
 * Figures 5, 6 and 7 on one large log (support/large-log.ts):
 *   5. rebuild of all projections from zero by the projection engine, beside a plain ordered scan
 *      of the same table, both in a child process (support/rebuild.child.ts);
 *   7. the child's resident set with the log open, and through the rebuild (sampled from /proc
 *      every 100 ms by this process, so sampling never waits on the child's event loop);
 *   6. then the built service on that data directory (its read model is the one just rebuilt):
 *      the evidence trail of an operation with 1,000 events, over HTTP, one client; and the
 *      projection lag while figure 1's load runs: for a probe submit, the time from its answer to
 *      the answer of a read that waits for its position (`wait_for_position`), so the figure
 *      includes that read's round trip under load and bounds the lag from above;
 *   7b. the service's peak resident set over all of that.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { RebuildChildResult } from '../support/rebuild.child';
import { quantilesBetween, scrapeHistogram } from '../support/histogram-scrape';
import { DIST, rssOf, runLoad, startLedger, type Served } from '../support/processes';
import type { LoadResult } from '../support/load.worker';
import { percentile, type FigureRow } from '../support/report';
import { planFact, submitPath } from '../support/submit-bodies';
import { writeLargeLog, writeLongOperation } from '../support/large-log';
import { setTimeout as sleep } from 'node:timers/promises';

export interface LargeLogSettings {
  dir: string;
  events: number;
  seconds: number;
  warmupSeconds: number;
  connections: number;
  /** Extra node arguments for the service processes (e.g. --cpu-prof). */
  nodeArgs?: string[];
}

/** An operation with a long history in the large log: its evidence trail is figure 6's query. */
export const LONG_REF = 'bench_long/op_1';
export const LONG_EVENTS = 1_000;

interface Sample {
  at: number;
  rssMb: number;
}

/** Runs the rebuild child, sampling its resident set until it exits. */
export function rebuildInChild(
  dataDir: string,
  nodeArgs: string[] = [],
): Promise<{ result: RebuildChildResult; samples: Sample[]; peakMb: number }> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, resolve(DIST, 'bench/support/rebuild.child.js'), dataDir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk) => (stdout += chunk));
    child.stderr?.on('data', (chunk) => (stderr += chunk));
    const samples: Sample[] = [];
    let peakMb = 0;
    const timer = setInterval(() => {
      const { rssMb, peakMb: hwm } = rssOf(child.pid ?? 0);
      if (rssMb > 0) samples.push({ at: Date.now(), rssMb });
      peakMb = Math.max(peakMb, hwm, rssMb);
    }, 100);
    child.once('exit', (code) => {
      clearInterval(timer);
      if (code !== 0) return reject(new Error(`rebuild child exited ${code}: ${stderr}`));
      try {
        resolveRun({
          result: JSON.parse(stdout.trim().split('\n').pop() ?? '') as RebuildChildResult,
          samples,
          peakMb,
        });
      } catch (error) {
        reject(new Error(`rebuild child printed no result: ${stdout} ${stderr} (${String(error)})`));
      }
    });
  });
}

const median = (values: number[]) => percentile(values, 0.5);

async function submitProbe(baseUrl: string, n: number): Promise<number> {
  const fact = planFact('probe', n);
  const response = await fetch(`${baseUrl}${submitPath(`probe/op_${n}`)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ events: [fact] }),
  });
  const body = (await response.json()) as { position?: number };
  if (!response.ok || typeof body.position !== 'number') throw new Error(`probe submit answered ${response.status}`);
  return body.position;
}

async function waitProjected(baseUrl: string, n: number, position: number): Promise<void> {
  const response = await fetch(
    `${baseUrl}${submitPath(`probe/op_${n}`).replace(/\/events$/, '/evidence')}?wait_for_position=${position}&wait_timeout_ms=30000`,
  );
  await response.arrayBuffer();
  if (!response.ok) throw new Error(`evidence read answered ${response.status}`);
}

const READABLE_HISTOGRAM = 'ledger_projection_readable_seconds';

/**
 * Four probe loops, each submitting then waiting for its position, 20 ms apart, while `running()`
 * (four, so that a p99 rests on a few hundred probes rather than on the single worst one); answers
 * the lags in ms.
 */
async function probeLag(baseUrl: string, running: () => boolean): Promise<number[]> {
  const lags: number[] = [];
  const loop = async (first: number) => {
    for (let n = first; running() && n < first + 5_000; n++) {
      const position = await submitProbe(baseUrl, n);
      const answeredAt = performance.now();
      await waitProjected(baseUrl, n, position);
      lags.push(performance.now() - answeredAt);
      await sleep(20);
    }
  };
  await Promise.all([0, 10_000, 20_000, 30_000].map(loop));
  return lags;
}

export interface UnderLoad {
  /** The evidence trail of the long operation: its default page, then the whole trail. */
  evidence: LoadResult;
  evidenceAll: LoadResult;
  /** Figure 1's load, and the probes' lags (answer → readable through a read, ms) while it ran. */
  load: LoadResult;
  lags: number[];
  /** The service's own commit → readable histogram over the same load. */
  inside: ReturnType<typeof quantilesBetween>;
  /** The evidence trail's default page read one at a time while the load ran (ms, as the client saw it). */
  evidenceUnderLoad: number[];
  /** The service's peak resident set from the first trail query to the end of the load, MB. */
  peakMb: number;
}

/** Reads `path` one request at a time, 20 ms apart, while `running()`; answers the latencies in ms. */
async function readWhile(baseUrl: string, path: string, running: () => boolean): Promise<number[]> {
  const latencies: number[] = [];
  while (running() && latencies.length < 20_000) {
    const from = performance.now();
    const response = await fetch(`${baseUrl}${path}`);
    await response.arrayBuffer();
    if (!response.ok) throw new Error(`${path} answered ${response.status} under load`);
    latencies.push(performance.now() - from);
    await sleep(20);
  }
  return latencies;
}

/**
 * Resets the kernel's peak resident set of `pid` (VmHWM) to its resident set now, so that the peak
 * read later is that of what ran in between (writing 5 to clear_refs, Linux ≥ 4.0; our own child).
 * Where it cannot, the peak is sampled instead (see serviceUnderLoad).
 */
function resetPeakOf(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/**
 * Figure 6 on a running service whose log holds `longRef` (an operation of LONG_EVENTS events): the
 * evidence trail's latency with one client, then figure 1's load with the lag probes, and the
 * service's peak resident set over both (not over its start-up checks before them).
 */
export async function serviceUnderLoad(
  server: Served,
  longRef: string,
  settings: Pick<LargeLogSettings, 'seconds' | 'warmupSeconds' | 'connections'>,
): Promise<UnderLoad> {
  const reset = resetPeakOf(server.pid);
  let sampledPeakMb = rssOf(server.pid).rssMb;
  const sampler = setInterval(() => {
    sampledPeakMb = Math.max(sampledPeakMb, rssOf(server.pid).rssMb);
  }, 100);
  try {
    const evidencePath = submitPath(longRef).replace(/\/events$/, '/evidence');
    const trail = (query: string) =>
      runLoad({
        url: server.baseUrl,
        connections: 1,
        seconds: 0,
        amount: 2_000,
        warmupSeconds: 1,
        scenario: { kind: 'get', path: `${evidencePath}${query}` },
      });
    // The default page (500 entries and a cursor), then the whole trail in one answer.
    const evidence = await trail('');
    const evidenceAll = await trail('?limit=1000');
    let loading = true;
    const loaded = runLoad({
      url: server.baseUrl,
      connections: settings.connections,
      seconds: settings.seconds,
      warmupSeconds: settings.warmupSeconds,
      scenario: { kind: 'plan', label: 'fig6' },
    }).finally(() => {
      loading = false;
    });
    // Probes start once the load's warm-up is over, so they measure the lag of the counted load.
    await sleep(settings.warmupSeconds * 1000 + 500);
    // The service's own count of the same thing, from each commit to readable (no HTTP round trip).
    const readableBefore = await scrapeHistogram(server.baseUrl, READABLE_HISTOGRAM);
    const [lags, evidenceUnderLoad] = await Promise.all([
      probeLag(server.baseUrl, () => loading),
      readWhile(server.baseUrl, evidencePath, () => loading),
    ]);
    const load = await loaded;
    const inside = quantilesBetween(
      readableBefore,
      await scrapeHistogram(server.baseUrl, READABLE_HISTOGRAM),
      [0.5, 0.99],
    );
    const peakMb = reset ? Math.max(rssOf(server.pid).peakMb, sampledPeakMb) : sampledPeakMb;
    return { evidence, evidenceAll, load, lags, inside, evidenceUnderLoad, peakMb };
  } finally {
    clearInterval(sampler);
  }
}

export async function largeLogFigures(settings: LargeLogSettings, log: (line: string) => void): Promise<FigureRow[]> {
  const dataDir = join(settings.dir, 'large');
  const eventsFile = join(dataDir, 'events.sqlite');
  log(`  figures 5–7: writing a log of ${settings.events.toLocaleString('en-US')} events`);
  const written = await writeLargeLog(eventsFile, settings.events - LONG_EVENTS);
  const longEvents = await writeLongOperation(eventsFile, LONG_REF, LONG_EVENTS);
  log(
    `    ${written.events + longEvents} events in ${written.seconds.toFixed(1)} s (+ an operation of ${longEvents} events)`,
  );

  log('  figure 5: plain ordered scan, then the projection rebuild (child process)');
  const { result, samples, peakMb } = await rebuildInChild(dataDir, settings.nodeArgs);
  const during = samples.filter((s) => s.at >= result.rebuild.from && s.at <= result.rebuild.to).map((s) => s.rssMb);
  const opened = samples.filter((s) => s.at >= result.openedAt && s.at < result.scan.from).map((s) => s.rssMb);
  const tenth = Math.max(1, Math.floor(during.length / 10));
  // Flat: the last tenth of the rebuild holds no more than the second tenth (after warm-up) + 10 %.
  const early = median(during.slice(tenth, 2 * tenth));
  const late = median(during.slice(-tenth));
  const rebuildPeak = Math.max(0, ...during);
  const flat = during.length < 10 || late <= early * 1.1;
  const scanRate = result.scan.rows / (result.scan.ms / 1000);
  const rebuildRate = result.rebuild.events / (result.rebuild.ms / 1000);

  log(
    '  figure 6: the service on that log — evidence trail of a 1,000-event operation, then projection lag under load',
  );
  const server = await startLedger(dataDir, {}, settings.nodeArgs);
  let evidence: LoadResult;
  let evidenceAll: LoadResult;
  let load: LoadResult;
  let lags: number[];
  let evidenceUnderLoad: number[];
  let inside: ReturnType<typeof quantilesBetween>;
  let serverIdleMb: number;
  let serverStartPeakMb: number;
  let serverPeakMb: number;
  let startupChecksSeconds: number;
  try {
    // The service answers at once, but serves read models only once the start-up checks (the
    // whole-log audit and the read-model comparison, docs/reliability.md) are done: wait for them.
    const checksFrom = performance.now();
    for (const deadline = Date.now() + 15 * 60_000; Date.now() < deadline; await sleep(250)) {
      const ready = await fetch(`${server.baseUrl}/health/ready`).catch(() => undefined);
      // Ready (the read models checked) is not enough: the whole-log audit goes on after it, and
      // figure 6 measures the service once both are done.
      const integrity =
        ready?.status === 200
          ? ((await ready.json()) as { details?: { integrity?: { state?: string } } }).details?.integrity?.state
          : undefined;
      if (ready?.status === 200 && integrity !== 'verifying') break;
    }
    startupChecksSeconds = (performance.now() - checksFrom) / 1000;
    log(`    start-up checks of the log and the read models: ${startupChecksSeconds.toFixed(1)} s`);
    await sleep(500);
    serverIdleMb = rssOf(server.pid).rssMb;
    serverStartPeakMb = rssOf(server.pid).peakMb;
    ({
      evidence,
      evidenceAll,
      load,
      lags,
      inside,
      evidenceUnderLoad,
      peakMb: serverPeakMb,
    } = await serviceUnderLoad(server, LONG_REF, settings));
  } finally {
    await server.stop();
  }
  const lagP99 = percentile(lags, 0.99);
  return [
    {
      id: '5',
      name: `projection rebuild, ${result.rebuild.events.toLocaleString('en-US')} events, 4 projections`,
      figure: { label: 'ProjectionEngine.rebuild', value: rebuildRate, unit: 'events/s' },
      baseline: { label: 'plain ordered scan of the table', value: scanRate, unit: 'events/s' },
      ratio: rebuildRate / scanRate,
      target: { text: '≥ 40 %', met: rebuildRate / scanRate >= 0.4 },
      details: {
        rebuild_seconds: result.rebuild.ms / 1000,
        scan_seconds: result.scan.ms / 1000,
        scanned_mb: result.scan.bytes / 1e6,
        log: { ...written, long_operation_events: longEvents },
      },
    },
    {
      id: '6',
      name: `evidence trail query, operation of ${longEvents} events (default page: 500 entries), 1 client`,
      figure: { label: 'p99', value: evidence.latencyMs.p99, unit: `ms (p50 ${evidence.latencyMs.p50} ms)` },
      target: { text: 'p99 < 5 ms', met: evidence.latencyMs.p99 < 5 },
      details: {
        p50_ms: evidence.latencyMs.p50,
        p90_ms: evidence.latencyMs.p90,
        max_ms: evidence.latencyMs.max,
        rps: evidence.rps,
        non2xx: evidence.non2xx,
      },
    },
    {
      id: '6a',
      name: `evidence trail query, the same operation, whole trail (?limit=1000), 1 client`,
      figure: { label: 'p99', value: evidenceAll.latencyMs.p99, unit: `ms (p50 ${evidenceAll.latencyMs.p50} ms)` },
      target: { text: 'p99 < 5 ms', met: evidenceAll.latencyMs.p99 < 5 },
      details: {
        p50_ms: evidenceAll.latencyMs.p50,
        p90_ms: evidenceAll.latencyMs.p90,
        max_ms: evidenceAll.latencyMs.max,
        rps: evidenceAll.rps,
        non2xx: evidenceAll.non2xx,
      },
    },
    {
      id: '6d',
      name: `evidence trail query, the same operation (default page), one at a time while figure 1's load runs`,
      figure: {
        label: 'p99',
        value: percentile(evidenceUnderLoad, 0.99),
        unit: `ms (p50 ${percentile(evidenceUnderLoad, 0.5).toFixed(1)} ms, ${evidenceUnderLoad.length} reads)`,
      },
      target: { text: 'p99 < 5 ms', met: evidenceUnderLoad.length > 0 && percentile(evidenceUnderLoad, 0.99) < 5 },
      details: { reads: evidenceUnderLoad.length, p50_ms: percentile(evidenceUnderLoad, 0.5) },
    },
    {
      id: '6b',
      name: 'projection lag under figure 1 load (answer → readable, upper bound)',
      figure: { label: 'p99', value: lagP99, unit: `ms (p50 ${percentile(lags, 0.5).toFixed(1)} ms)` },
      target: { text: 'p99 < 20 ms', met: lags.length > 0 && lagP99 < 20 },
      details: {
        probes: lags.length,
        p50_ms: percentile(lags, 0.5),
        max_ms: Math.max(0, ...lags),
        load_rps: load.rps,
        load_p99_ms: load.latencyMs.p99,
        load_non2xx: load.non2xx,
        store_events: written.events + longEvents,
      },
    },
    {
      id: '6c',
      name: 'projection lag inside the service under the same load (each commit → every read model shows it)',
      figure: {
        label: 'p99 at most',
        value: inside.bounds[1] * 1000,
        unit: `ms (p50 at most ${inside.bounds[0] * 1000} ms; ${inside.count.toLocaleString('en-US')} commits)`,
      },
      details: {
        histogram: READABLE_HISTOGRAM,
        commits: inside.count,
        p50_at_most_ms: inside.bounds[0] * 1000,
        p99_at_most_ms: inside.bounds[1] * 1000,
      },
    },
    {
      id: '7',
      name: 'peak RSS: log open, and during the rebuild (child process)',
      figure: { label: 'rebuild peak', value: Math.max(peakMb, rebuildPeak), unit: 'MB' },
      baseline: { label: 'log open, before the scan', value: Math.max(0, ...opened), unit: 'MB' },
      target: { text: '< 300 MB and flat', met: Math.max(peakMb, rebuildPeak) < 300 && flat },
      details: {
        early_rebuild_mb: early,
        late_rebuild_mb: late,
        flat,
        samples: during.length,
        rss_after_rebuild_mb: result.rssAfterMb,
      },
    },
    {
      id: '7b',
      name: 'peak RSS of the service with the log stored, through figure 6 (after its start-up checks)',
      figure: { label: 'service peak', value: serverPeakMb, unit: 'MB' },
      baseline: { label: 'service idle after start', value: serverIdleMb, unit: 'MB' },
      target: { text: '< 300 MB', met: serverPeakMb < 300 },
      details: { peak_through_start_up_checks_mb: serverStartPeakMb },
    },
  ];
}
