/**
 * Child processes of the benchmark: the built service, the bare Fastify baseline and the load
 * worker, each in its own process, all on loopback. Every child is ended by its own handle.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
import type { LoadJob, LoadResult } from './load.worker';
import { setTimeout as sleep } from 'node:timers/promises';

/** Paths of the built output (this file runs as dist/bench/support/processes.js). */
export const DIST = resolve(__dirname, '../..');
export const LEDGER_MAIN = resolve(DIST, 'src/main.js');
const BARE_FASTIFY = resolve(DIST, 'bench/support/bare-fastify.server.js');
const LOAD_WORKER = resolve(DIST, 'bench/support/load.worker.js');

export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

export interface Served {
  child: ChildProcess;
  baseUrl: string;
  pid: number;
  output(): string;
  /** SIGTERM and wait for the exit (the service shuts down gracefully). */
  stop(): Promise<void>;
}

export async function serve(
  script: string,
  env: NodeJS.ProcessEnv,
  ready: (baseUrl: string) => Promise<boolean>,
  nodeArgs: string[] = [],
): Promise<Served> {
  const port = await freePort();
  const child = spawn(process.execPath, [...nodeArgs, script], {
    env: { ...process.env, ...env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk) => (output += chunk));
  child.stderr?.on('data', (chunk) => (output += chunk));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const baseUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${script} exited (${child.exitCode}):\n${output}`);
    if (await ready(baseUrl).catch(() => false)) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${script} did not start in time:\n${output}`);
    }
    await sleep(50);
  }
  return {
    child,
    baseUrl,
    pid: child.pid ?? 0,
    output: () => output,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * The built service on the embedded store, as `npm start` runs it, with local mode's defaults. The
 * rate limit is raised (it would refuse the load) and logs are at warn (a log line per request is
 * not what is measured); durability settings are left alone.
 */
export function startLedger(dataDir: string, env: NodeJS.ProcessEnv = {}, nodeArgs: string[] = []): Promise<Served> {
  return serve(
    LEDGER_MAIN,
    { LEDGER_DATA_DIR: dataDir, LOG_LEVEL: 'warn', LEDGER_RATE_LIMIT_PER_MINUTE: '10000000', ...env },
    async (baseUrl) => (await fetch(`${baseUrl}/v1/schema/envelope`)).ok,
    nodeArgs,
  );
}

export function startBareFastify(): Promise<Served> {
  return serve(BARE_FASTIFY, {}, async (baseUrl) => {
    const response = await fetch(`${baseUrl}/v1/operations/x/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"events":[]}',
    });
    return response.ok;
  });
}

/** Runs one autocannon job in a separate process and returns what it measured. */
export function runLoad(job: LoadJob): Promise<LoadResult> {
  return new Promise((resolveResult, reject) => {
    const child = spawn(process.execPath, [LOAD_WORKER, JSON.stringify(job)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk) => (stdout += chunk));
    child.stderr?.on('data', (chunk) => (stderr += chunk));
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`load worker exited ${code}: ${stderr}`));
      try {
        resolveResult(JSON.parse(stdout.trim().split('\n').pop() ?? '') as LoadResult);
      } catch (error) {
        reject(new Error(`load worker printed no result: ${stdout} ${stderr} (${String(error)})`));
      }
    });
  });
}

/** Resident set of a process now and its peak (VmHWM), in MB, from /proc (Linux). */
export function rssOf(pid: number): { rssMb: number; peakMb: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
    return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
  } catch {
    return { rssMb: 0, peakMb: 0 };
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux; 0 elsewhere). */
export function cpuSecondsOf(pid: number): number {
  try {
    // Fields after the command name (which may hold spaces): utime is the 12th, stime the 13th.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/** Group commits so far and appends per commit, from the service's Prometheus exposition. */
export async function groupCommits(baseUrl: string): Promise<{ commits: number; appends: number }> {
  try {
    const text = await (await fetch(`${baseUrl}/metrics`)).text();
    const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
    return {
      commits: read('ledger_store_group_commit_appends_count'),
      appends: read('ledger_store_group_commit_appends_sum'),
    };
  } catch {
    return { commits: 0, appends: 0 };
  }
}
