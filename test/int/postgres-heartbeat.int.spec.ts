/**
 * The instances' heartbeat on PostgreSQL (postgres-time-base.adapter.ts): one statement, its lock
 * taken inside it, so an instance descheduled between statements holds no transaction open, no lock
 * the other instances' heartbeats queue on, and nothing that holds back the log's high-water mark
 * (docs/postgres.md, "Time"); and what it keeps and answers is exactly what the port's
 * `heartbeatCutMs` says, its edges included.
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { ADVISORY_LOCKS } from '../../src/adapters/postgres/postgres-database';
import { PostgresTimeBaseStore } from '../../src/adapters/postgres/postgres-time-base.adapter';
import { heartbeatCutMs, type InstanceHeartbeat } from '../../src/store/time-base.port';
import { describeWithPostgres } from '../support/postgres';
import { untilValue } from '../support/until';

const T0 = 1_800_000_000_000;
const HOUR = 3_600_000;

const heartbeat = (instanceId: string, ledgerMs: number, seq: number): InstanceHeartbeat => ({
  instance_id: instanceId,
  boot_id: 'boot-x',
  ledger_ms: ledgerMs,
  monotonic_ms: 1,
  seq,
});

describeWithPostgres('the PostgreSQL heartbeat', (database) => {
  let store: PostgresTimeBaseStore;
  let watcher: Client;

  beforeEach(async () => {
    watcher = new Client({ connectionString: database().url });
    await watcher.connect();
    await watcher.query('DROP TABLE IF EXISTS ledger_clock_heartbeats');
    store = new PostgresTimeBaseStore({ connectionString: database().url });
    // Migrated and connected, the table empty again: what follows is the heartbeats' own traffic.
    await store.beat(heartbeat('warm-up', T0, 0));
    await store.leave('warm-up');
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await store.close();
    await watcher.end();
  });

  it('is one statement on the wire: no BEGIN, no transaction left open between statements', async () => {
    // Every statement of every connection of the process passes through the driver's Client.query.
    const sent = jest.spyOn(Client.prototype, 'query');
    const answered = await store.beat(heartbeat(randomUUID(), T0 + 10, 1));
    expect(answered).toHaveLength(1);
    expect(sent).toHaveBeenCalledTimes(1);
    expect(String(sent.mock.calls[0][0])).not.toMatch(/^\s*(BEGIN|START)/i);
  });

  it('takes the time base lock inside its one statement, and holds it no longer', async () => {
    await watcher.query('SELECT pg_advisory_lock($1)', [ADVISORY_LOCKS.timeBase]);
    let beating: Promise<InstanceHeartbeat[]> | undefined;
    try {
      beating = store.beat(heartbeat(randomUUID(), T0, 1));
      // The heartbeat's backend waits on the lock in the heartbeat's own statement, not before it.
      const waiting = await untilValue('the heartbeat waiting on the lock', async () => {
        const { rows } = await watcher.query<{ query: string }>(
          `SELECT query FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`,
        );
        return rows[0];
      });
      expect(waiting.query).toMatch(/INSERT INTO ledger_clock_heartbeats/);
    } finally {
      await watcher.query('SELECT pg_advisory_unlock($1)', [ADVISORY_LOCKS.timeBase]);
    }
    expect(await beating).toHaveLength(1);
    const { rows } = await watcher.query("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = $1", [
      ADVISORY_LOCKS.timeBase,
    ]);
    expect(rows).toEqual([]);
  });

  it('heartbeats of three instances sent all at once each land, each answered with its own latest', async () => {
    const stores = [
      store,
      new PostgresTimeBaseStore({ connectionString: database().url }),
      new PostgresTimeBaseStore({ connectionString: database().url }),
    ];
    const ids = stores.map(() => randomUUID());
    try {
      for (let seq = 1; seq <= 10; seq++) {
        const answers = await Promise.all(
          stores.map((each, index) => each.beat(heartbeat(ids[index], T0 + seq * 2_000 + index, seq))),
        );
        answers.forEach((answer, index) =>
          expect(answer.find((beat) => beat.instance_id === ids[index])).toMatchObject({ seq }),
        );
      }
      const { rows } = await watcher.query<{ record: string }>('SELECT record FROM ledger_clock_heartbeats');
      expect(rows.map((row) => JSON.parse(row.record) as InstanceHeartbeat).map((beat) => beat.seq)).toEqual([
        10, 10, 10,
      ]);
    } finally {
      await Promise.all(stores.slice(1).map((each) => each.close()));
    }
  });

  it("drops its own heartbeat when even it is older than the cut, and a tie's second newest is the newest", async () => {
    const [ahead, also, behind] = [randomUUID(), randomUUID(), randomUUID()];
    await store.beat(heartbeat(behind, T0, 1));
    await store.beat(heartbeat(ahead, T0 + 48 * HOUR, 1));
    // Two clocks agree two days ahead: the one behind, beating again, is older than the cut by both.
    await store.beat(heartbeat(also, T0 + 48 * HOUR, 1));
    const answered = await store.beat(heartbeat(behind, T0 + 1_000, 2));
    expect(answered.map((beat) => beat.instance_id).sort()).toEqual([ahead, also].sort());
    const { rows } = await watcher.query<{ instance_id: string }>('SELECT instance_id FROM ledger_clock_heartbeats');
    expect(rows.map((row) => row.instance_id).sort()).toEqual([ahead, also].sort());
  });

  it('keeps and answers what heartbeatCutMs keeps, over many beats of clocks days apart', async () => {
    // A fixed pseudo-random walk (a linear congruential generator): the same beats on every run.
    let seed = 47;
    const next = (below: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed % below;
    };
    const instances = Array.from({ length: 5 }, () => randomUUID());
    const model = new Map<string, InstanceHeartbeat>();
    for (let seq = 1; seq <= 60; seq++) {
      const instance = instances[next(instances.length)];
      // Within three days either side, on whole quarter-days (the retention is four), so ties and
      // heartbeats exactly at the cut both occur.
      const beat = heartbeat(instance, T0 + (next(25) - 12) * 6 * HOUR, seq);
      model.set(instance, beat);
      const cut = heartbeatCutMs([...model.values()].map((kept) => kept.ledger_ms));
      for (const [id, kept] of model) if (kept.ledger_ms < cut) model.delete(id);
      const expected = [...model.values()].sort((x, y) => (x.instance_id < y.instance_id ? -1 : 1));

      expect(await store.beat(beat)).toEqual(expected);
      const { rows } = await watcher.query<{ record: string }>(
        'SELECT record FROM ledger_clock_heartbeats ORDER BY instance_id',
      );
      expect(rows.map((row) => JSON.parse(row.record) as InstanceHeartbeat)).toEqual(expected);
    }
  });
});
