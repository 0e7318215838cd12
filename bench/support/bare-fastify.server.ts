/**
 * The baseline of figures 1 and 2: the same Fastify the service runs on (the one Nest's adapter
 * loads), one route on the same path that parses the same JSON body with the same parser settings
 * and answers a small JSON object. No validation, no store: the ceiling of HTTP on this machine.
 *
 *   PORT=3100 node dist/bench/support/bare-fastify.server.js
 */
import Fastify from 'fastify';

async function main(): Promise<void> {
  const app = Fastify({
    bodyLimit: 256 * 1024,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    logger: false,
  });
  let n = 0;
  app.post('/v1/operations/:ref/events', async (request) => {
    const body = request.body as { events?: unknown[] };
    // Touch the parsed body so the parse cannot be skipped, and answer about as much as the ledger's
    // answer carries in its envelope.
    n += 1;
    return {
      revision: 0,
      position: n,
      events: Array.isArray(body.events) ? body.events.length : 0,
      status: 'appended',
    };
  });
  await app.listen({ port: Number(process.env.PORT ?? 3100), host: '127.0.0.1' });
  const close = () => void app.close().then(() => process.exit(0));
  process.on('SIGTERM', close);
  process.on('SIGINT', close);
  process.stdout.write('bare fastify listening\n');
}

main().catch((error: unknown) => {
  process.stderr.write(`bare fastify failed: ${String(error)}\n`);
  process.exit(1);
});
