/**
 * Runs the example invoice provider on loopback:
 *   node dist/examples/invoice-provider/main.js [--port 4010]
 * Faults are queued with POST /__faults, e.g.
 *   curl -s localhost:4010/__faults -d '{"fault":{"kind":"accept-then-timeout"},"times":1}'
 * `--port 0` takes a free port (the line it prints names it); GET /__requests counts create
 * requests per idempotency key, GET /invoices lists the invoices.
 */
import { startInvoiceProvider } from './invoice-provider';

function flag(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? process.argv[index + 1] : undefined;
}

async function main(): Promise<void> {
  const port = Number(flag('port') ?? process.env.PROVIDER_PORT ?? 4010);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port must be a port number, got ${port}`);
  const provider = await startInvoiceProvider({ port });
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
