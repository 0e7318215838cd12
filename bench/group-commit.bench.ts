/**
 * Appends per second through the HTTP submit path, group commit on vs off, in one run on one
 * machine. Each mode runs the built server (`node dist/src/main.js`, its own process, a fresh data
 * directory on the same disk) with LEDGER_GROUP_COMMIT unset (on) or `off`; autocannon, in this
 * process, drives it over loopback with 50 concurrent connections. Every request plans a new
 * operation: one submit = one append of two events (StepPlanned + its TransitionRecorded) in one
 * transaction, acknowledged only after COMMIT (synchronous=FULL). Modes alternate (on, off, on,
 * off, ...) so that drift of the machine (page cache, other load) hits both alike; each round has a
 * warm-up that is not counted. The rate counted is 2xx answers / measured seconds, cross-checked
 * against the rows the server really stored.
 *
 *   npm run build && node dist/bench/group-commit.bench.js [seconds_per_round=10] [rounds_per_mode=2] [connections=50]
 */
import Database from 'better-sqlite3';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const seconds = Number(process.argv[2] ?? 10);
const roundsPerMode = Number(process.argv[3] ?? 2);
const connections = Number(process.argv[4] ?? 50);
const WARMUP_SECONDS = 2;
const MAIN = resolve(__dirname, '../src/main.js');

interface AutocannonResult {
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  '2xx': number;
  latency: { p50: number; p99: number; average: number };
  statusCodeStats?: Record<string, { count: number }>;
}
interface AutocannonRequest {
  method: string;
  path: string;
  body?: string;
  headers?: Record<string, string>;
}
type Autocannon = (options: Record<string, unknown>) => Promise<AutocannonResult>;
// autocannon ships no types; this is the part of its API used here.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const autocannon = require('autocannon') as Autocannon;

type Mode = 'on' | 'off';

interface Round {
  mode: Mode;
  appendsPerSecond: number;
  ok: number;
  errors: number;
  p50: number;
  p99: number;
  storedAppends: number;
}

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

async function startServer(mode: Mode, dataDir: string): Promise<{ child: ChildProcess; baseUrl: string }> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    LEDGER_DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    LEDGER_RATE_LIMIT_PER_MINUTE: '10000000',
  };
  if (mode === 'off') env.LEDGER_GROUP_COMMIT = 'off';
  else delete env.LEDGER_GROUP_COMMIT;
  const child = spawn(process.execPath, [MAIN], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk) => (stderr += chunk));
  const baseUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited (${child.exitCode}): ${stderr}`);
    try {
      if ((await fetch(`${baseUrl}/v1/schema/envelope`)).ok) return { child, baseUrl };
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) throw new Error(`server did not start: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolveExit) => {
    // A child ended by a signal has exitCode null and signalCode set: both mean it is gone.
    if (child.exitCode !== null || child.signalCode !== null) return resolveExit();
    child.once('exit', () => resolveExit());
    child.kill('SIGTERM');
  });
}

/** A new operation per request: unique ref, unique event id, so each request is one real append. */
function planRequest(label: string) {
  return (request: AutocannonRequest): AutocannonRequest => {
    const id = randomUUID();
    const ref = `bench_${label}/${id}`;
    return {
      ...request,
      method: 'POST',
      path: `/v1/operations/${encodeURIComponent(ref)}/events`,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        events: [
          {
            event_id: id,
            type: 'StepPlanned',
            data: {
              run_id: `bench_${label}`,
              tool: 'create_invoice',
              side_effect: 'write',
              input_hash: `sha256:${id}`,
            },
          },
        ],
      }),
    };
  };
}

async function runRound(mode: Mode, index: number): Promise<Round> {
  const dataDir = mkdtempSync(join(tmpdir(), `ledger-gc-bench-${mode}-`));
  const { child, baseUrl } = await startServer(mode, dataDir);
  try {
    const common = { url: baseUrl, connections, pipelining: 1 };
    await autocannon({
      ...common,
      duration: WARMUP_SECONDS,
      requests: [{ setupRequest: planRequest(`warm${index}`) }],
    });
    const result = await autocannon({
      ...common,
      duration: seconds,
      requests: [{ setupRequest: planRequest(`run${index}`) }],
    });
    await stop(child);
    const db = new Database(join(dataDir, 'events.sqlite'), { readonly: true });
    const stored = db
      .prepare("SELECT COUNT(*) AS n FROM events WHERE type = 'StepPlanned' AND stream LIKE ?")
      .get(`%bench_run${index}/%`) as { n: number };
    db.close();
    return {
      mode,
      appendsPerSecond: result['2xx'] / result.duration,
      ok: result['2xx'],
      errors: result.errors + result.non2xx,
      p50: result.latency.p50,
      p99: result.latency.p99,
      storedAppends: stored.n,
    };
  } finally {
    await stop(child);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;

async function main(): Promise<void> {
  console.log(
    `group commit bench: HTTP submit path, ${connections} connections, ${seconds}s per round (+${WARMUP_SECONDS}s warm-up), ${roundsPerMode} rounds per mode, data in ${tmpdir()}`,
  );
  const rounds: Round[] = [];
  for (let index = 0; index < roundsPerMode * 2; index++) {
    const mode: Mode = index % 2 === 0 ? 'on' : 'off';
    const round = await runRound(mode, index);
    rounds.push(round);
    console.log(
      `  round ${index + 1} group commit ${mode.padEnd(3)}: ${round.appendsPerSecond.toFixed(0).padStart(6)} appends/s ` +
        `(${round.ok} acknowledged, ${round.storedAppends} stored, ${round.errors} errors; latency p50 ${round.p50} ms, p99 ${round.p99} ms)`,
    );
    if (round.storedAppends < round.ok)
      throw new Error(`round ${index + 1}: ${round.ok} acknowledged but only ${round.storedAppends} stored`);
  }
  const on = mean(rounds.filter((r) => r.mode === 'on').map((r) => r.appendsPerSecond));
  const off = mean(rounds.filter((r) => r.mode === 'off').map((r) => r.appendsPerSecond));
  console.log(`group commit on : ${on.toFixed(0)} appends/s (mean of ${roundsPerMode})`);
  console.log(`group commit off: ${off.toFixed(0)} appends/s (mean of ${roundsPerMode})`);
  console.log(`ratio on/off    : ${(on / off).toFixed(2)}x`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
