/**
 * Ledger time on PostgreSQL is the database's (docs/postgres.md, "Time"): a new boot's base takes
 * its wall time from `clock_timestamp()`, so instances on hosts whose clocks disagree by an hour
 * either way still start from one clock. The bound below is minutes, far from any round trip: it
 * tells the database's clock from a host's an hour off, and asserts no timing.
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { PostgresTimeBaseStore } from '../../src/adapters/postgres/postgres-time-base.adapter';
import { InstanceClocks } from '../../src/ledger/instance-clocks';
import { describeWithPostgres } from '../support/postgres';

const HOUR = 3_600_000;
const FAR = 10 * 60_000;

describeWithPostgres('the time base on the database clock', (database) => {
  const databaseNowMs = async () => {
    const client = new Client({ connectionString: database().url });
    await client.connect();
    try {
      const { rows } = await client.query<{ now_ms: number }>(
        'SELECT extract(epoch FROM clock_timestamp())::float8 * 1000 AS now_ms',
      );
      return rows[0].now_ms;
    } finally {
      await client.end();
    }
  };

  it('starts instances whose host clocks are an hour apart from the database clock, not their own', async () => {
    const started: InstanceClocks[] = [];
    try {
      for (const offsetMs of [HOUR, -HOUR]) {
        const store = new PostgresTimeBaseStore({ connectionString: database().url, wallClock: 'database' });
        started.push(
          await InstanceClocks.start(store, {
            bootId: `boot-${randomUUID()}`,
            wallNow: () => Date.now() + offsetMs,
            timer: false,
          }),
        );
      }
      const now = await databaseNowMs();
      const bases = started.map((clocks) => Date.parse(clocks.status().time_base_since));
      for (const base of bases) expect(Math.abs(now - base)).toBeLessThan(FAR);
      // Both read the one shared base store: each is a base of the store, not a private clock.
      expect(started.map((clocks) => clocks.status().time_base)).toEqual(['shared', 'shared']);
    } finally {
      await Promise.all(started.map((clocks) => clocks.stop()));
    }
  });
});
