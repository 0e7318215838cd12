/**
 * Starts the built service (`node dist/src/main.js`) as a real process on a free loopback port with
 * a temporary data directory: the tests talk to it over real HTTP, as a runtime would.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const MAIN = resolve(__dirname, '../../dist/src/main.js');

export interface LedgerProcess {
  baseUrl: string;
  port: number;
  dataDir: string;
  child: ChildProcess;
  output(): string;
  /** SIGTERM and wait for exit (graceful). */
  stop(): Promise<void>;
  /** SIGKILL and wait for exit (a crash). */
  kill(): Promise<void>;
  /** Start again on the same port and data directory. */
  restart(): Promise<LedgerProcess>;
  /** Remove the data directory (after stop/kill). */
  cleanup(): void;
}

export async function freePort(): Promise<number> {
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

export interface StartOptions {
  env?: Record<string, string>;
  dataDir?: string;
  port?: number;
  timeoutMs?: number;
  /** Another build of the service (default: this checkout's dist/src/main.js). */
  main?: string;
  /** Working directory of the process (default: inherited). */
  cwd?: string;
  /** A file the process's stdout and stderr are appended to as they come (kept across restarts). */
  logFile?: string;
}

export async function startLedger(options: StartOptions = {}): Promise<LedgerProcess> {
  const port = options.port ?? (await freePort());
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'ledger-e2e-'));
  const child = spawn(process.execPath, [options.main ?? MAIN], {
    cwd: options.cwd,
    env: { ...process.env, PORT: String(port), LEDGER_DATA_DIR: dataDir, LOG_LEVEL: 'warn', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer) => {
    output += chunk;
    if (options.logFile) appendFileSync(options.logFile, chunk);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  const baseUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  for (;;) {
    if (child.exitCode !== null) throw new Error(`ledger exited with ${child.exitCode}:\n${output}`);
    try {
      const response = await fetch(`${baseUrl}/v1/schema/envelope`);
      if (response.ok) break;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`ledger did not start in time:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const handle: LedgerProcess = {
    baseUrl,
    port,
    dataDir,
    child,
    output: () => output,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
    kill: async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
    },
    restart: () => startLedger({ ...options, port, dataDir }),
    cleanup: () => rmSync(dataDir, { recursive: true, force: true }),
  };
  return handle;
}
