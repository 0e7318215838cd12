/**
 * Two peers of the tool-step figure: the bare Fastify route with a store under it, better-sqlite3
 * in WAL with synchronous=FULL, answering each request only after its COMMIT.
 *   MODE=txn    one transaction (one fsync) per request;
 *   MODE=group  a one-tick group commit: the requests that arrive in one turn of the event loop
 *               are written in one transaction and all answered after its COMMIT.
 * Each event is one row; a repeated event_id is ignored (INSERT OR IGNORE on a unique key), so a
 * retried request is idempotent. No validation, no decision, no hash chain: the storage ceiling.
 *
 *   MODE=group PORT=3100 DB=/tmp/x.sqlite node dist/bench/support/peers/sqlite-route.server.js
 */
import Database from 'better-sqlite3';
import Fastify from 'fastify';

interface Pending {
  stream: string;
  events: Array<{ event_id?: unknown; type?: unknown; data?: unknown }>;
  done: (error?: Error) => void;
}

async function main(): Promise<void> {
  const mode = process.env.MODE === 'txn' ? 'txn' : 'group';
  const db = new Database(process.env.DB ?? 'sqlite-route.sqlite');
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(`CREATE TABLE IF NOT EXISTS events (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    stream TEXT NOT NULL,
    event_id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    data TEXT NOT NULL
  )`);
  const insert = db.prepare('INSERT OR IGNORE INTO events (stream, event_id, type, data) VALUES (?, ?, ?, ?)');
  const write = db.transaction((batch: Pending[]) => {
    for (const request of batch) {
      for (const event of request.events)
        insert.run(request.stream, String(event.event_id), String(event.type), JSON.stringify(event.data ?? null));
    }
  });

  let queue: Pending[] = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    const batch = queue;
    queue = [];
    try {
      write(batch);
      for (const request of batch) request.done();
    } catch (error) {
      for (const request of batch) request.done(error as Error);
    }
  };
  const append = (stream: string, events: Pending['events']) =>
    new Promise<void>((resolve, reject) => {
      const request: Pending = { stream, events, done: (error) => (error ? reject(error) : resolve()) };
      if (mode === 'txn') {
        try {
          write([request]);
          resolve();
        } catch (error) {
          reject(error as Error);
        }
        return;
      }
      queue.push(request);
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    });

  const app = Fastify({
    bodyLimit: 256 * 1024,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    logger: false,
  });
  let n = 0;
  app.post('/v1/operations/:ref/events', async (request, reply) => {
    const body = request.body as { events?: Pending['events'] };
    const events = Array.isArray(body.events) ? body.events : [];
    await append((request.params as { ref: string }).ref, events);
    n += events.length;
    reply.code(201);
    return { revision: 0, position: n, events: events.length, status: 'appended' };
  });
  await app.listen({ port: Number(process.env.PORT ?? 3100), host: '127.0.0.1' });
  const close = () =>
    void app.close().then(() => {
      db.close();
      process.exit(0);
    });
  process.on('SIGTERM', close);
  process.on('SIGINT', close);
  process.stdout.write(`sqlite route (${mode}) listening\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`sqlite route failed: ${String(error)}\n`);
  process.exit(1);
});
