import 'reflect-metadata';
import { createApp } from './app';
import { parseApiKeys } from './auth/api-keys';
import { loadApiKeyEntries } from './auth/load-keys';
import { ConfigError, loadConfig } from './config/ledger-config';

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

async function main(): Promise<void> {
  const config = loadConfig();
  const apiKeys = parseApiKeys(loadApiKeyEntries(config));
  const localMode = apiKeys.length === 0;
  if (localMode && !LOOPBACK.has(config.host)) {
    // SPEC §8: never listen beyond loopback without authentication.
    throw new ConfigError(
      `refusing to listen on ${config.host} without API keys: set LEDGER_API_KEYS (key:role:tenant) or bind to 127.0.0.1`,
    );
  }
  const app = await createApp({ config, apiKeys });
  await app.listen({ port: config.port, host: config.host });
  const address = app.getHttpServer().address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const where = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  if (localMode) {
    process.stderr.write(
      `\n*** LOCAL MODE: no API keys configured. Listening on ${where} only, tenant "default", no authentication. ***\n` +
        `*** Set LEDGER_API_KEYS=key:role:tenant to serve beyond this machine.                                   ***\n\n`,
    );
  }
  process.stdout.write(`recovery-ledger listening on ${where} (store: ${config.store}, data: ${config.dataDir})\n`);
}

main().catch((error: unknown) => {
  const message = error instanceof ConfigError ? error.message : error instanceof Error ? error.stack ?? error.message : String(error);
  process.stderr.write(`recovery-ledger failed to start: ${message}\n`);
  process.exit(1);
});
