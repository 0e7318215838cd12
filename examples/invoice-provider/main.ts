/**
 * Runs the example invoice provider on loopback:
 *   node dist/examples/invoice-provider/main.js [--port 4010]
 *     [--flaky-timeout 0.05] [--flaky-rate-limit 0.05] [--seed 1] [--retry-after-s 1] [--no-idempotency]
 *     [--keep-alive-ms 5000]
 * The flaky flags fail that fraction of creates at random: committed then never answered, or 429.
 * --keep-alive-ms keeps an idle connection open that long (a client's pooled connection outlives a pause).
 * --no-idempotency makes every create that gets through a new invoice, so duplicates show in
 * GET /__stats (`created`: invoices per operation_ref, counted at the commit).
 * Faults are queued with POST /__faults, e.g.
 *   curl -s localhost:4010/__faults -d '{"fault":{"kind":"accept-then-timeout"},"times":1}'
 * `--port 0` takes a free port (the line it prints names it); GET /__requests counts create
 * requests per idempotency key, GET /invoices lists the invoices.
 */
import { startInvoiceProvider } from './invoice-provider';
import { exitOnHelp } from '../example-cli';

function flag(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? process.argv[index + 1] : undefined;
}

async function main(): Promise<void> {
  exitOnHelp(__filename);
  const port = Number(flag('port') ?? process.env.PROVIDER_PORT ?? 4010);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port must be a port number, got ${port}`);
  const fraction = (name: string) => {
    const raw = flag(name);
    const value = raw === undefined ? 0 : Number(raw);
    if (!(value >= 0 && value <= 1)) throw new Error(`--${name} must be a fraction from 0 to 1, got ${raw}`);
    return value;
  };
  const keepAlive = flag('keep-alive-ms');
  const keepAliveMs = keepAlive === undefined ? undefined : Number(keepAlive);
  if (keepAliveMs !== undefined && !(Number.isInteger(keepAliveMs) && keepAliveMs >= 0))
    throw new Error(`--keep-alive-ms must be a whole number of ms, got ${keepAlive}`);
  const provider = await startInvoiceProvider({
    port,
    ...(keepAliveMs === undefined ? {} : { keepAliveMs }),
    idempotency: !process.argv.includes('--no-idempotency'),
    flaky: {
      timeoutAfterCommit: fraction('flaky-timeout'),
      rateLimit: fraction('flaky-rate-limit'),
      seed: Number(flag('seed') ?? 1),
      retryAfterSeconds: Number(flag('retry-after-s') ?? 1),
    },
  });
  process.stdout.write(`invoice provider listening on ${provider.url}\n`);
  const stop = () => {
    provider.close().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`invoice provider failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
