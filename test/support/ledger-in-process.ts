/**
 * The real service, built from source, in the test's own process: the Nest application of
 * `createApp` (every module, the SQLite store, the projection worker thread) listening on a free
 * loopback port. Tests talk to it over real HTTP exactly as they would to `startLedger`'s process,
 * at a fraction of the cost; a test needs `startLedger` only where it must kill, restart, pause or
 * isolate the process.
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
  /** Close the application as a SIGTERM would (graceful: every acknowledged write is committed). */
  stop(): Promise<void>;
  /** Remove the data directory (after stop). */
  cleanup(): void;
}

export interface InProcessOptions {
  /** Environment variables the service reads at start, as `startLedger`'s `env`. */
  env?: Record<string, string>;
  dataDir?: string;
}

/**
 * Some modules read `process.env`, when they are built or later, so the test's variables are set on
 * it and left there: Jest gives each test file its own copy, and a second start in the same file
 * sets its own.
 */
export async function startLedgerInProcess(options: InProcessOptions = {}): Promise<InProcessLedger> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'ledger-int-'));
  const env: Record<string, string> = { LOG_LEVEL: 'warn', ...options.env, LEDGER_DATA_DIR: dataDir, PORT: '0' };
  Object.assign(process.env, env);
  // Loaded here, after the variables: a module may read them when it is first required.
  const { createApp } = await import('../../src/app');
  const { parseApiKeys } = await import('../../src/auth/api-keys');
  const { loadApiKeyEntries } = await import('../../src/auth/load-keys');
  const { loadConfig } = await import('../../src/config/ledger-config');
  const config = loadConfig(process.env);
  const app: NestFastifyApplication = await createApp({ config, apiKeys: parseApiKeys(loadApiKeyEntries(config)) });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.getHttpServer().address();
  const port = typeof address === 'object' && address ? address.port : 0;
  let closed: Promise<void> | undefined;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    port,
    dataDir,
    app,
    stop: () => (closed ??= app.close()),
    cleanup: () => rmSync(dataDir, { recursive: true, force: true }),
  };
}
