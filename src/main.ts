import 'reflect-metadata';
// First: the OpenTelemetry SDK (when an OTEL_* exporter variable is set) starts before NestJS and Fastify load.
import './observability/tracing-start';
import type { LoggerService } from '@nestjs/common';
import { parseApiKeys } from './auth/api-keys';
import { loadApiKeyEntries } from './auth/load-keys';
import { ConfigError, loadConfig } from './config/ledger-config';

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

async function main(): Promise<void> {
  const config = loadConfig();
  const apiKeys = parseApiKeys(loadApiKeyEntries(config));
  const localMode = apiKeys.length === 0;
  if (localMode && !LOOPBACK.has(config.host)) {
    // docs/contract.md §8: never listen beyond loopback without authentication.
    throw new ConfigError(
      `refusing to listen on ${config.host} without API keys: set LEDGER_API_KEYS (key:role:tenant) or bind to 127.0.0.1`,
    );
  }
  // The application (NestJS, Fastify, every module) is loaded only once the settings are known
  // good: a refusal to start answers before it, in a fraction of the time a start takes.
  const { createApp } = await import('./app');
  const app = await createApp({ config, apiKeys });
  await app.listen({ port: config.port, host: config.host });
  const address = app.getHttpServer().address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const where = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  if (localMode) {
    process.stderr.write(
      `\n*** LOCAL MODE: no API keys configured. Listening on ${where} only, tenant "default", no authentication. ***\n` +
        `*** Set LEDGER_API_KEYS=key:role:tenant to serve beyond this machine.                                   ***\n` +
        `*** The one local caller may record approvals too: there is no separate approver in local mode.         ***\n\n`,
    );
  }
  const { Logger } = await import('@nestjs/common');
  announceApprovals(new Logger('Approvals'), config.allowSelfApproval, localMode, apiKeys);
  process.stdout.write(`recovery-ledger listening on ${where} (store: ${config.store}, data: ${config.dataDir})\n`);
}

/**
 * Who may record approvals, said at start at warn level whenever it is not "approver keys only":
 * an operator reading the start-up log must not miss that the agent's runtime may approve itself.
 */
function announceApprovals(
  logger: LoggerService,
  selfApproval: boolean,
  localMode: boolean,
  keys: ReturnType<typeof parseApiKeys>,
): void {
  if (localMode) {
    logger.warn(
      { local_mode: true },
      'LOCAL MODE: the one local caller records approvals itself; there is no separate approver',
    );
    return;
  }
  if (selfApproval) {
    logger.warn(
      { setting: 'LEDGER_ALLOW_SELF_APPROVAL' },
      'SELF-APPROVAL IS ON (LEDGER_ALLOW_SELF_APPROVAL=true): runtime keys may record ApprovalRecorded, so an agent can approve its own steps',
    );
  }
  const tenants = new Set(keys.filter((key) => key.role === 'runtime').map((key) => key.tenant));
  for (const key of keys) if (key.role === 'approver') tenants.delete(key.tenant);
  if (!selfApproval && tenants.size > 0) {
    logger.warn(
      { tenants: [...tenants].sort() },
      'no approver key for these tenants: their steps awaiting approval cannot be approved',
    );
  }
}

main().catch((error: unknown) => {
  const message =
    error instanceof ConfigError
      ? error.message
      : error instanceof Error
        ? (error.stack ?? error.message)
        : String(error);
  process.stderr.write(`recovery-ledger failed to start: ${message}\n`);
  process.exit(1);
});
