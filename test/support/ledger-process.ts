/**
 * Starts the built service (`node dist/src/main.js`) as a real process on a free loopback port with
 * a temporary data directory: the tests talk to it over real HTTP, as a runtime would.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { assertBuildCurrent } from './build-check';

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
  /** The last resort before a start that never comes is reported as hung (default: 150 s). */
  timeoutMs?: number;
  /** Another build of the service (default: this checkout's dist/src/main.js). */
  main?: string;
  /** Working directory of the process (default: inherited). */
  cwd?: string;
  /** A file the process's stdout and stderr are appended to as they come (kept across restarts). */
  logFile?: string;
  /**
   * A command the service is run under, which execs it in place (`ip netns exec <name>`: see
   * test/support/network-namespace.ts), so signals still reach the service itself.
   */
  wrap?: string[];
  /** Where the tests reach the service, when not at its port on this host's loopback. */
  baseUrl?: string;
}

/**
 * How long a start may take before it is reported as hung. Not a guess at how long a start takes:
 * the wait ends on the service's own "listening" line (or its answer, or its exit) whenever that
 * comes; this bound only turns a process that never gets there into a clear failure.
 */
const LAST_RESORT_MS = 150_000;

export async function startLedger(options: StartOptions = {}): Promise<LedgerProcess> {
  // dist/ is what runs here: it must be the build of the sources under test.
  if (!options.main) assertBuildCurrent();
  const port = options.port ?? (await freePort());
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'ledger-e2e-'));
  const [command, ...prefix] = [...(options.wrap ?? []), process.execPath];
  const child = spawn(command, [...prefix, options.main ?? MAIN], {
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
  const baseUrl = options.baseUrl ?? `http://127.0.0.1:${port}`;
  try {
    await untilReady(child, baseUrl, () => output, options.timeoutMs ?? LAST_RESORT_MS);
  } catch (error) {
    if (child.exitCode === null) child.kill('SIGKILL');
    throw error;
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

/**
 * Resolves when the service says it listens (main's "listening on" line) or answers on its port,
 * rejects at once when it exits, and only after `lastResortMs` when it does neither.
 */
function untilReady(child: ChildProcess, baseUrl: string, output: () => string, lastResortMs: number): Promise<void> {
  return new Promise<void>((resolveReady, reject) => {
    let settled = false;
    const finish = (error?: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(hung);
      clearInterval(probe);
      child.stdout?.off('data', onData);
      child.off('close', onExit);
      if (error) reject(error);
      else resolveReady();
    };
    const onData = (): void => {
      if (/listening on http/.test(output())) finish();
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void =>
      finish(new Error(`ledger exited with ${code ?? signal} before it listened:\n${output()}`));
    child.stdout?.on('data', onData);
    // 'close', not 'exit': by then every line the process wrote is in the output the error quotes.
    child.once('close', onExit);
    // A build that does not print the line (or prints it elsewhere) is still seen once it answers.
    const probe = setInterval(() => {
      fetch(`${baseUrl}/v1/schema/envelope`).then(
        (response) => response.ok && finish(),
        () => undefined,
      );
    }, 250);
    const hung = setTimeout(
      () => finish(new Error(`ledger neither listened nor exited within ${lastResortMs / 1000} s:\n${output()}`)),
      lastResortMs,
    );
    onData();
  });
}
