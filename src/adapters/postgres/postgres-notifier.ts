import type { Client } from 'pg';
import type { PostgresOptions } from './postgres-database';

/**
 * One LISTEN connection per store, waking its followers when any instance commits on `channel`. A
 * missed notification (the connection dropped, the server restarted) costs one poll interval,
 * never an event: followers read the table, the notification only says when.
 *
 * Every wake is counted. A follower takes the count (`heard()`) before it reads and hands it to
 * `wait`: a notification that came while it was reading, when no one was waiting, then ends the
 * wait at once instead of being lost to it until the next poll.
 */
export class Notifier {
  private client: Client | undefined;
  private connecting: Promise<void> | undefined;
  private readonly waiters = new Set<() => void>();
  private wakes = 0;
  private closed = false;

  constructor(
    private readonly options: PostgresOptions,
    private readonly channel: string,
  ) {}

  /** How many wakes so far: taken before a read, handed to `wait` after it. */
  heard(): number {
    return this.wakes;
  }

  /**
   * Resolves on the next notification, after `timeoutMs`, or when `stop()` is true at a wake; at
   * once when a wake came since `heard()` answered `since`.
   */
  wait(timeoutMs: number, stop: () => boolean, since = this.wakes): Promise<void> {
    this.listen();
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      if (stop() || since !== this.wakes) done();
      else this.waiters.add(done);
    });
  }

  wakeAll(): void {
    this.wakes++;
    for (const wake of [...this.waiters]) wake();
  }

  private listen(): void {
    if (this.client || this.connecting || this.closed) return;
    this.connecting = (async () => {
      const { Client: PgClient } = await import('pg');
      const client = new PgClient({
        connectionString: this.options.connectionString,
        connectionTimeoutMillis: this.options.connectTimeoutMs ?? 5_000,
      });
      const drop = () => {
        if (this.client === client) this.client = undefined;
        client.end().catch(() => undefined);
      };
      client.on('error', drop);
      client.on('end', drop);
      client.on('notification', () => this.wakeAll());
      try {
        await client.connect();
        await client.query(`LISTEN ${this.channel}`);
        if (this.closed) {
          drop();
        } else {
          this.client = client;
          // What committed while this connection was being made was announced to no one: read again.
          this.wakeAll();
        }
      } catch {
        drop();
      }
    })().finally(() => (this.connecting = undefined));
  }

  close(): void {
    this.closed = true;
    this.wakeAll();
    const client = this.client;
    this.client = undefined;
    void client?.end().catch(() => undefined);
  }
}
