/**
 * The real service, built from source, in the test's own process: the Nest application of
 * `createApp` (every module, the SQLite store, the projection worker thread) listening on a free
 * loopback port. Tests talk to it over real HTTP exactly as they would to `startLedger`'s process,
 * at a fraction of the cost; a test needs `startLedger` only where it must kill, restart, pause or
 * isolate the process (README.md, "Tests by tier").
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';

export interface InProcessLedger {
  baseUrl: string;
  port: number;
  dataDir: string;
  app: NestFastifyApplication;
  /** The service's log records (one JSON line each), as its process would have written them to stdout. */
  output(): string;
  /** Close the application as a SIGTERM would (graceful: every acknowledged write is committed). */
  stop(): Promise<void>;
  /** Remove the data directory (after stop). */
  cleanup(): void;
}

export interface InProcessOptions {
  /** Environment variables the service reads at start, as `startLedger`'s `env`. */
  env?: Record<string, string>;
  dataDir?: string;
  /** A loopback port to listen on (default: a free one). */
  port?: number;
}

/** The environment the test file began with: each start sees it plus its own `env`, no earlier start's. */
const baseline: NodeJS.ProcessEnv = { ...process.env };
let previous: Promise<unknown> = Promise.resolve();

/**
 * Some modules read `process.env` when they are built, so each start sets it whole (the file's own
 * environment plus `env`, as a process of its own would see) and starts run one after another, so
 * two started together do not read each other's variables. Jest gives each test file its own copy.
 */
export function startLedgerInProcess(options: InProcessOptions = {}): Promise<InProcessLedger> {
  const started = previous.then(() => start(options));
  previous = started.catch(() => undefined);
  return started;
}

async function start(options: InProcessOptions): Promise<InProcessLedger> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'ledger-int-'));
  for (const name of Object.keys(process.env)) if (!(name in baseline)) delete process.env[name];
  Object.assign(process.env, baseline, { LOG_LEVEL: 'warn', ...options.env, LEDGER_DATA_DIR: dataDir, PORT: '0' });
  // Loaded here, after the variables: a module may read them when it is first required.
  const { createApp } = await import('../../src/app');
  const { parseApiKeys } = await import('../../src/auth/api-keys');
  const { loadApiKeyEntries } = await import('../../src/auth/load-keys');
  const { loadConfig } = await import('../../src/config/ledger-config');
  const config = loadConfig(process.env);
  let output = '';
  const app: NestFastifyApplication = await createApp({
    config,
    apiKeys: parseApiKeys(loadApiKeyEntries(config)),
    logDestination: { write: (line: string) => void (output += line) },
  });
  await app.listen({ port: options.port ?? 0, host: '127.0.0.1' });
  const address = app.getHttpServer().address();
  const port = typeof address === 'object' && address ? address.port : 0;
  let closed: Promise<void> | undefined;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    port,
    dataDir,
    app,
    output: () => output,
    stop: () => (closed ??= app.close()),
    cleanup: () => rmSync(dataDir, { recursive: true, force: true }),
  };
}

// The same names as ledger-process.ts's, so a spec changes tier by its import path alone.
export { startLedgerInProcess as startLedger, type InProcessLedger as LedgerProcess };
