/**
 * Two built instances on one PostgreSQL (docs/postgres.md), as behind a load balancer: requests go
 * to each in turn, and a third of the way through the load something fails for real: one instance
 * is killed (SIGKILL), or the database server itself is (`pg_ctl stop -m immediate`) and started
 * again. A runtime whose request found no answer, or a 503, sends the very same facts (same event
 * ids) again, to the next instance, as it would after any lost answer (docs/contract.md §4). After
 * it: every write acknowledged by either instance is in the log, and no operation was dispatched
 * twice.
 */
import { createHash, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { canonicalJson } from '@recovery-ledger/core';
import { Client } from 'pg';
import { ADVISORY_LOCKS } from '../../src/adapters/postgres/postgres-database';
import { PostgresEventStore } from '../../src/adapters/postgres/postgres-event-store.adapter';
import { operationStream } from '../../src/store/stream-names';
import { fact, ledgerAt, opPath, request, type HttpAnswer } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import {
  createNamespaceLink,
  namespacesAvailable,
  NETNS_REQUIRED,
  NETNS_SKIP_LINE,
  startLedgerInNamespace,
  type NamespaceLink,
  type NamespacedLedger,
} from '../support/network-namespace';
import { describeWithPostgres, startTestDatabase, type TestDatabase } from '../support/postgres';
import { envelopes, INPUT_1, ok } from '../support/scenario';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy';
import { until } from '../support/until';

const TENANT = 'default'; // local mode
const OPERATIONS = 36;
const WORKERS = 6;

interface LoadResult {
  refs: string[];
  acknowledged: Array<{ ref: string; event_id: string }>;
  acknowledgedAfterFault: number;
}

/**
 * Plans, dispatches and settles OPERATIONS operations through `instances` in turn; `fault` runs
 * once, when a third of the writes have been acknowledged, while the load goes on.
 */
async function runLoad(instances: LedgerProcess[], fault: () => Promise<void>): Promise<LoadResult> {
  const acknowledged: LoadResult['acknowledged'] = [];
  let turn = 0;
  let faulted: Promise<void> | undefined;
  let acknowledgedAfterFault = 0;

  async function submit(ref: string, events: Array<{ event_id: string }>): Promise<HttpAnswer> {
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const target = instances[turn++ % instances.length];
      const answer = await ledgerAt(target.baseUrl)
        .submit(ref, events)
        .catch(() => undefined);
      if (!answer || answer.status === 503) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        continue;
      }
      if (answer.status === 200) {
        acknowledged.push(...events.map((event) => ({ ref, event_id: event.event_id })));
        if (faulted) acknowledgedAfterFault++;
        if (!faulted && acknowledged.length >= OPERATIONS) faulted = fault();
      }
      return answer;
    }
    throw new Error(`no instance took ${ref} within a minute`);
  }

  const refs = Array.from({ length: OPERATIONS }, (_, index) => `run_${randomUUID().slice(0, 8)}/pg-load-${index}`);
  const queue = [...refs];
  const worker = async () => {
    for (let ref = queue.shift(); ref !== undefined; ref = queue.shift()) {
      const run_id = ref.split('/')[0];
      ok(
        await submit(ref, [
          fact('StepPlanned', { run_id, tool: 'create_invoice', side_effect: 'write', input_hash: INPUT_1 }),
        ]),
      );
      ok(await submit(ref, [fact('AttemptDispatched', { attempt: 1, input_hash: INPUT_1 })]));
      ok(await submit(ref, [fact('EnvelopeRecorded', { attempt: 1, envelope: envelopes.success(ref) })]));
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, worker));
  await faulted;
  expect(faulted).toBeDefined();
  return { refs, acknowledged, acknowledgedAfterFault };
}

/** What the log in the database says about the load: acknowledged writes missing, operations dispatched twice. */
async function audit(database: TestDatabase, load: LoadResult): Promise<{ lost: string[]; twice: string[] }> {
  const log = new PostgresEventStore({ connectionString: database.url });
  try {
    const lost: string[] = [];
    const twice: string[] = [];
    for (const ref of load.refs) {
      const stream = await log.readStream(operationStream(TENANT, ref));
      const ids = new Set(stream.map((event) => event.event_id));
      for (const { event_id } of load.acknowledged.filter((entry) => entry.ref === ref)) {
        if (!ids.has(event_id)) lost.push(`${ref} ${event_id}`);
      }
      if (stream.filter((event) => event.type === 'AttemptDispatched').length !== 1) twice.push(ref);
    }
    return { lost, twice };
  } finally {
    await log.close();
  }
}

/**
 * The lease that took over `leaseId`, as the shared leases table holds it: when it was granted, by
 * the ledger's clock, against when the lease it replaced had ended.
 */
async function takeOverOf(
  database: TestDatabase,
  leaseId: string,
): Promise<{ holder: string; acquired_at_ms: number; took_over: { holder: string; expired_at_ms: number } }> {
  const rows = await rowsOf<{ record: string }>(database, 'SELECT record FROM ledger_leases');
  const records = rows.map((row) => JSON.parse(row.record));
  return records.find((record) => record.took_over?.lease_id === leaseId);
}

/** The rows of one statement, on a connection of its own to the test's database. */
async function rowsOf<Row>(database: TestDatabase, text: string, values: unknown[] = []): Promise<Row[]> {
  const client = new Client({ connectionString: database.url });
  await client.connect();
  try {
    return (await client.query(text, values)).rows as Row[];
  } finally {
    await client.end();
  }
}

/**
 * Who holds each election's advisory lock (the projector's, the webhook consumer's), as the server
 * sees it: the client address of the session holding it, and that session's state.
 */
async function electionHolders(
  database: TestDatabase,
): Promise<Record<'projector' | 'webhookConsumer', { address: string; state: string } | undefined>> {
  const rows = await rowsOf<{ key: string; address: string; state: string }>(
    database,
    `SELECT l.objid::bigint::text AS key, host(a.client_addr) AS address, a.state
       FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database()`,
  );
  const holder = (key: number) => {
    const row = rows.find((entry) => entry.key === String(key));
    return row && { address: row.address, state: row.state };
  };
  return { projector: holder(ADVISORY_LOCKS.projector), webhookConsumer: holder(ADVISORY_LOCKS.webhookConsumer) };
}

/** How many sessions the server keeps for clients at `address`. */
async function sessionsFrom(database: TestDatabase, address: string): Promise<number> {
  const [row] = await rowsOf<{ count: string }>(
    database,
    'SELECT count(*) AS count FROM pg_stat_activity WHERE host(client_addr) = $1',
    [address],
  );
  return Number(row.count);
}

/** A fresh operation's plan sent to `instance`, as `answerOf` reports the answer. */
function planProbe(instance: LedgerProcess, name: string): Promise<string> {
  const probe = `run_${randomUUID().slice(0, 8)}/${name}`;
  return answerOf(instance, 'POST', `${opPath(probe)}/events`, {
    events: [
      fact('StepPlanned', {
        run_id: probe.split('/')[0],
        tool: 'create_invoice',
        side_effect: 'write',
        input_hash: INPUT_1,
      }),
    ],
  });
}

/** Whether an instance projects the shared read models or copies them (docs/postgres.md, "Read models"). */
async function readModelRole(instance: LedgerProcess): Promise<string | undefined> {
  const answer = await request(instance.baseUrl, 'GET', '/health/ready').catch(() => undefined);
  return answer?.body?.details?.projections?.read_models;
}

/**
 * The operations of the load that an instance's list (GET /v1/operations, the shared read models)
 * does not show as succeeded, once it has caught up with the whole log as it stands.
 */
async function missingFromList(database: TestDatabase, instance: LedgerProcess, load: LoadResult): Promise<string[]> {
  const log = new PostgresEventStore({ connectionString: database.url });
  const head = await log.headPosition().finally(() => log.close());
  const missing: string[] = [];
  for (const ref of load.refs) {
    const run = ref.split('/')[0];
    const answer = await request(
      instance.baseUrl,
      'GET',
      `/v1/operations?run_id=${run}&wait_for_position=${head}&wait_timeout_ms=20000`,
    );
    const item = answer.body?.items?.find((entry: { operation_ref: string }) => entry.operation_ref === ref);
    if (answer.status !== 200 || item?.status !== 'succeeded') missing.push(`${ref} ${answer.status} ${item?.status}`);
  }
  return missing;
}

/** An answer as `status code`, or `no answer` when none came within a bound far above any round trip. */
async function answerOf(instance: LedgerProcess, method: string, path: string, body?: unknown): Promise<string> {
  try {
    const response = await fetch(`${instance.baseUrl}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(60_000),
    });
    const type = response.headers.get('content-type') ?? '';
    const parsed = (await response.json().catch(() => undefined)) as { code?: string } | undefined;
    return `${response.status} ${response.status >= 400 && !type.startsWith('application/problem+json') ? 'not problem+json' : (parsed?.code ?? '')}`.trim();
  } catch (error) {
    return `no answer (${(error as Error).name})`;
  }
}

describeWithPostgres('two built instances on one PostgreSQL', (database) => {
  const env = () => ({ LEDGER_STORE: 'postgres', DATABASE_URL: database().url });

  it('refuses to start with a query timeout outside its range, in one line that names the setting', async () => {
    // It exits on its own: the refusal is awaited, not raced against a guess of how long a start takes.
    await expect(startLedger({ env: { ...env(), LEDGER_POSTGRES_QUERY_TIMEOUT_MS: '0' } })).rejects.toThrow(
      'LEDGER_POSTGRES_QUERY_TIMEOUT_MS must be an integer from 1000 to 600000, got "0"',
    );
  });

  describe('on direct connections', () => {
    let instances: LedgerProcess[] = [];
    beforeEach(async () => {
      instances = [await startLedger({ env: env() }), await startLedger({ env: env() })];
    });
    afterEach(async () => {
      for (const instance of instances) {
        await instance.stop();
        instance.cleanup();
      }
    });

    it('loses no acknowledged write and dispatches nothing twice when one instance is killed mid-load', async () => {
      const [doomed, survivor] = instances;
      const load = await runLoad(instances, () => doomed.kill());
      expect(doomed.child.signalCode).toBe('SIGKILL');
      expect(load.acknowledgedAfterFault).toBeGreaterThan(0);
      expect(await audit(database(), load)).toEqual({ lost: [], twice: [] });
      for (const ref of load.refs) {
        expect(ok(await ledgerAt(survivor.baseUrl).state(ref)).status).toBe('succeeded');
      }
    });

    it('hands the read models to the other instance when the projecting one is killed mid-load, and its lists catch up', async () => {
      const roles = await until(
        async () => Promise.all(instances.map(readModelRole)),
        (both) => both.includes('projector') && both.includes('copy'),
        'one instance to project the shared read models and the other to copy them',
      );
      const projector = instances[roles.indexOf('projector')];
      const survivor = instances[roles.indexOf('copy')];
      const load = await runLoad(instances, () => projector.kill());
      expect(projector.child.signalCode).toBe('SIGKILL');
      expect(load.acknowledgedAfterFault).toBeGreaterThan(0);
      expect(await audit(database(), load)).toEqual({ lost: [], twice: [] });
      await until(
        () => readModelRole(survivor),
        (role) => role === 'projector',
        'the surviving instance to project',
      );
      expect(await missingFromList(database(), survivor, load)).toEqual([]);
    });

    const crashable = !process.env.DATABASE_URL;
    (crashable ? it : it.skip)(
      'loses no acknowledged write and dispatches nothing twice when PostgreSQL crashes mid-load and comes back',
      async () => {
        const crash = database().crash as () => () => void;
        let crashes = 0;
        const load = await runLoad(instances, async () => {
          const start = crash();
          crashes++;
          // Down while the load runs into it: the instances answer 503 or drop the request meanwhile.
          await new Promise((resolve) => setTimeout(resolve, 1_000));
          start();
        });
        expect(crashes).toBe(1);
        expect(load.acknowledgedAfterFault).toBeGreaterThan(0);
        expect(await audit(database(), load)).toEqual({ lost: [], twice: [] });
        for (const instance of instances) {
          // The projector's session ended with the server: one instance is elected again, and both lists catch up.
          expect(await missingFromList(database(), instance, load)).toEqual([]);
          for (const ref of load.refs) {
            expect(ok(await ledgerAt(instance.baseUrl).state(ref)).status).toBe('succeeded');
          }
        }
      },
    );
  });

  describe.each([
    ['resets its connections and closes its port', 'reset'],
    ['passes no byte on, either way, connections left open', 'silence'],
  ] as const)('one instance cut off from PostgreSQL mid-load, through a proxy that %s', (_label, kind) => {
    /**
     * The instance that projects the read models reaches PostgreSQL through a TCP proxy in this
     * process; the other connects directly. A third of the way through the load, and while a worker
     * holds a lease taken through it, the proxy cuts it off: either it resets every connection and
     * refuses new ones (a closed port), or it passes no byte on, either way, and leaves every
     * connection open (a link that drops packets, noticed by no reset). Meanwhile the cut instance
     * must answer with a typed 503 (not hang, not another 5xx: after a silence, once its query
     * timeout has passed), and the other must hand the held item over once its lease has ended by
     * the shared clock, and not before; after a reset it also takes the projector's turn (after a
     * silence the server cannot tell through the proxy, whose kernel answers its keep-alive probes:
     * docs/postgres.md, "Faults"). Once the link is back the cut instance serves again. Afterwards,
     * as in every fault here: no acknowledged write lost, nothing dispatched twice.
     */
    const LEASE_MS = 3_000;
    const WORK_INPUT = { customer_id: 'cus_cut', amount_cents: 900, currency: 'EUR' };
    const workInputHash = createHash('sha256').update(canonicalJson(WORK_INPUT)).digest('hex');
    let proxy: TcpProxy;
    let cut: LedgerProcess;
    let direct: LedgerProcess;
    beforeAll(async () => {
      proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(database().url).port) });
      cut = await startLedger({ env: { ...env(), DATABASE_URL: proxy.through(database().url) } });
      // Started once the first projects, so the instance cut off is the projector.
      await until(
        () => readModelRole(cut),
        (role) => role === 'projector',
        'the first instance to project',
      );
      direct = await startLedger({ env: env() });
      // The whole-log audit each instance runs behind its start is left to finish first: one that a
      // cut interrupts is not run again, and readiness stays down until an admin's audit.
      for (const instance of [cut, direct])
        await until(
          () => request(instance.baseUrl, 'GET', '/health/ready'),
          (answer) => answer.body?.details?.integrity?.audit?.state === 'verified',
          'the audit behind the start to finish',
        );
    });
    afterAll(async () => {
      for (const instance of [cut, direct]) {
        await instance?.stop();
        instance?.cleanup();
      }
      await proxy?.close();
    });

    async function poll(instance: LedgerProcess, worker: string) {
      const answer = await request<{
        items: Array<{
          operation_ref: string;
          kind: string;
          lease: { id: string; holder: string; took_over_from?: string };
        }>;
      }>(instance.baseUrl, 'GET', `/v1/work?worker=${worker}&limit=100&wait_ms=500&lease_ms=${LEASE_MS}`);
      return answer.status === 200 ? answer.body.items : [];
    }

    it("the cut instance answers typed 503s, the other hands its worker's item over once the lease has ended (and projects, after a reset); after it serves again, nothing lost or dispatched twice", async () => {
      expect(await readModelRole(direct)).toBe('copy');
      // A worker takes an item through the instance about to be cut off, and dispatches it.
      const held = `run_${randomUUID().slice(0, 8)}/pg-cut-held`;
      ok(
        await ledgerAt(direct.baseUrl).submit(held, [
          fact('StepPlanned', {
            run_id: held.split('/')[0],
            tool: 'create_invoice',
            side_effect: 'write',
            input_hash: workInputHash,
            input: WORK_INPUT,
            policy: { dispatch_timeout_ms: 1_000, consistency_window_ms: 0 },
          }),
        ]),
      );
      const items = await until(
        () => poll(cut, 'w-cut'),
        (found) => found.some((item) => item.operation_ref === held),
        'the item on the instance about to be cut off',
      );
      const lease = items.find((item) => item.operation_ref === held)?.lease as { id: string };
      for (const item of items.filter((entry) => entry.operation_ref !== held))
        await request(cut.baseUrl, 'POST', `${opPath(item.operation_ref)}/lease/release`, { lease_id: item.lease.id });
      ok(
        await ledgerAt(cut.baseUrl, { 'ledger-lease': lease.id }).submit(held, [
          fact('AttemptDispatched', { attempt: 1, input_hash: workInputHash }),
        ]),
      );

      const during: string[] = [];
      let takenOver: { lease: { holder: string; took_over_from?: string }; kind: string } | undefined;
      const load = await runLoad([cut, direct], async () => {
        if (kind === 'reset') await proxy.cut();
        else proxy.silence();
        // The cut instance, asked for a write, a renewal of its worker's lease and a read of the log.
        // Asked at once, side by side: each must be answered, by a typed 503.
        during.push(
          ...(await Promise.all([
            planProbe(cut, 'pg-cut-probe'),
            answerOf(cut, 'POST', `${opPath(held)}/lease/renew`, { lease_id: lease.id, lease_ms: LEASE_MS }),
            answerOf(cut, 'GET', `${opPath(held)}/events`),
          ])),
        );
        if (kind === 'reset')
          await until(
            () => readModelRole(direct),
            (role) => role === 'projector',
            'the instance still connected to project',
          );
        // The worker behind the cut instance can no longer renew: once its lease has ended by the
        // shared clock, the other instance hands the item to another worker, to verify.
        const found = await until(
          () => poll(direct, 'w-direct'),
          (seen) => seen.some((item) => item.operation_ref === held),
          'the held item handed over after its lease',
        );
        takenOver = found.find((item) => item.operation_ref === held);
        await proxy.restore();
      });
      expect(load.acknowledgedAfterFault).toBeGreaterThan(0);
      for (const answer of during) expect(answer).toBe('503 STORE_UNAVAILABLE');
      expect(takenOver).toMatchObject({ kind: 'verify', lease: { holder: 'w-direct', took_over_from: 'w-cut' } });
      // Taken over once the cut-off worker's lease had ended, not before: both times by the ledger's clock.
      const record = await takeOverOf(database(), lease.id);
      expect(record).toMatchObject({ holder: 'w-direct', took_over: { holder: 'w-cut' } });
      expect(record.acquired_at_ms).toBeGreaterThanOrEqual(record.took_over.expired_at_ms);
      expect(await audit(database(), { ...load, refs: [...load.refs, held] })).toEqual({ lost: [], twice: [] });

      // Back: the cut instance takes writes again, its worker's old lease is refused, and its list
      // (a copy again, or the projector) catches up with the whole load.
      await until(
        () => request(cut.baseUrl, 'GET', '/health/ready'),
        (answer) => answer.status === 200,
        'the cut instance ready again',
      );
      expect(
        await answerOf(cut, 'POST', `${opPath(held)}/lease/renew`, { lease_id: lease.id, lease_ms: LEASE_MS }),
      ).toBe('409 LEASE_LOST');
      expect(await missingFromList(database(), cut, load)).toEqual([]);
      expect(await missingFromList(database(), direct, load)).toEqual([]);
    });
  });

  /**
   * One instance runs in a network namespace joined to this host by a veth pair, and reaches a
   * PostgreSQL of its own that listens on the host end too (test/support/network-namespace.ts);
   * the other connects on loopback. The instance inside is made the projector and the webhook
   * consumer, left idle (its election sessions idle, not in a transaction), and then its link is
   * silenced for real: the host end of the pair goes down, every packet either way is lost, and no
   * proxy's kernel answers the server's keep-alive probes for it. The server must end its sessions
   * by those probes (5 s, then 3 unanswered 2 s apart: docs/postgres.md, "Faults"), and with them
   * the advisory locks, which the other instance then takes: it projects and consumes, while the
   * instance cut off answers typed 503s. Once the link is back the cut instance serves again, gives
   * up the roles it no longer holds, and nothing acknowledged is lost or dispatched twice. The wait
   * for the take-over has a deadline far above the bound, so only a bound that does not hold (no
   * keep-alives: two hours) fails it.
   */
  const namespaces = namespacesAvailable();
  const ownCluster = !process.env.DATABASE_URL;
  if (!namespaces) {
    if (NETNS_REQUIRED)
      describe('one instance in a network namespace', () => {
        it('needs a network namespace (LEDGER_REQUIRE_NETNS=1)', () => {
          throw new Error(NETNS_SKIP_LINE.replace('tests skipped', 'tests required'));
        });
      });
    // Written directly: console.log inside Jest adds a stack frame, and this is meant as one line.
    else process.stderr.write(`${NETNS_SKIP_LINE}\n`);
  } else if (!ownCluster) {
    process.stderr.write(
      'network-namespace test skipped: it starts a PostgreSQL of its own that listens on the namespace link, and DATABASE_URL is set\n',
    );
  }
  (namespaces && ownCluster ? describe : describe.skip)(
    'one instance in a network namespace, its link to PostgreSQL silenced while it is idle',
    () => {
      let link: NamespaceLink | undefined;
      let linked: TestDatabase | undefined;
      let cut: NamespacedLedger | undefined;
      let direct: LedgerProcess | undefined;
      const db = () => linked as TestDatabase;
      beforeAll(async () => {
        link = createNamespaceLink();
        linked = await startTestDatabase({ address: link.hostAddress, client: link.namespaceAddress });
        const url = new URL(linked.url);
        url.hostname = link.hostAddress;
        cut = await startLedgerInNamespace(link, { env: { LEDGER_STORE: 'postgres', DATABASE_URL: url.toString() } });
        const inside = link.namespaceAddress;
        // Started once the first holds both roles, so the instance cut off is the projector and the consumer.
        await until(
          () => electionHolders(db()),
          (holders) => holders.projector?.address === inside && holders.webhookConsumer?.address === inside,
          'the instance in the namespace to project and consume',
          60_000,
        );
        direct = await startLedger({ env: { LEDGER_STORE: 'postgres', DATABASE_URL: linked.url } });
        // The whole-log audit behind each start is left to finish first (see the proxy's cut above).
        for (const instance of [cut, direct])
          await until(
            () => request(instance.baseUrl, 'GET', '/health/ready'),
            (answer) => answer.body?.details?.integrity?.audit?.state === 'verified',
            'the audit behind the start to finish',
            60_000,
          );
      }, 240_000);
      afterAll(async () => {
        // Each step on its own, the namespace removed whatever failed before: a test that failed
        // mid-cut leaves the link down, so the instance inside is killed, not asked to finish.
        try {
          await cut?.kill().catch(() => undefined);
          await cut?.closeForwarders().catch(() => undefined);
          cut?.cleanup();
          await direct?.stop().catch(() => undefined);
          direct?.cleanup();
          await linked?.stop().catch(() => undefined);
        } finally {
          link?.remove();
        }
      }, 120_000);

      it('the server ends its idle sessions by keep-alive, the other instance projects and consumes, the cut one answers typed 503s; back, it serves again with nothing lost or dispatched twice', async () => {
        const [inside, outside] = [cut as NamespacedLedger, direct as LedgerProcess];
        const { namespaceAddress } = link as NamespaceLink;
        expect(await readModelRole(outside)).toBe('copy');
        const before = await runLoad([inside, outside], async () => undefined);
        // Idle: everything published (its list has the whole load), both election sessions idle.
        expect(await missingFromList(db(), inside, before)).toEqual([]);
        const idle = await until(
          () => electionHolders(db()),
          (holders) => holders.projector?.state === 'idle' && holders.webhookConsumer?.state === 'idle',
          'the election sessions of the instance inside to be idle',
        );
        expect(idle).toMatchObject({
          projector: { address: namespaceAddress },
          webhookConsumer: { address: namespaceAddress },
        });

        (link as NamespaceLink).silence();
        // Asked at once, side by side, while the server is still waiting on its probes.
        const during = Promise.all([
          planProbe(inside, 'pg-netns-probe'),
          answerOf(inside, 'GET', `${opPath(before.refs[0])}/events`),
        ]);
        // The server ends every session from the namespace: nothing of the instance inside is left.
        await until(
          () => sessionsFrom(db(), namespaceAddress),
          (count) => count === 0,
          'the server to end the sessions of the instance cut off',
          120_000,
        );
        const taken = await until(
          () => electionHolders(db()),
          (holders) => holders.projector?.address === '127.0.0.1' && holders.webhookConsumer?.address === '127.0.0.1',
          'the instance still connected to take both advisory locks',
          60_000,
        );
        expect(taken).toMatchObject({ projector: { address: '127.0.0.1' }, webhookConsumer: { address: '127.0.0.1' } });
        // Ended by its keep-alives, the server says so: its read from the silent client timed out.
        expect((db().serverLog as () => string)()).toMatch(/could not receive data from client: Connection timed out/);
        await until(
          () => readModelRole(outside),
          (role) => role === 'projector',
          'the instance still connected to project',
        );
        expect(await during).toEqual(['503 STORE_UNAVAILABLE', '503 STORE_UNAVAILABLE']);
        // Meanwhile the other serves alone, and its own projection lists what it takes.
        const meanwhile = await runLoad([outside], async () => undefined);
        expect(await missingFromList(db(), outside, meanwhile)).toEqual([]);

        (link as NamespaceLink).restore();
        await until(
          () => request(inside.baseUrl, 'GET', '/health/ready'),
          (answer) => answer.status === 200,
          'the cut instance ready again',
          60_000,
        );
        const after = await runLoad([inside, outside], async () => undefined);
        // It finds its old sessions gone and copies what the other projects: one projector, one consumer.
        await until(
          () => readModelRole(inside),
          (role) => role === 'copy',
          'the instance that was cut off to copy the read models',
          60_000,
        );
        expect(await readModelRole(outside)).toBe('projector');
        expect(await electionHolders(db())).toMatchObject({
          projector: { address: '127.0.0.1' },
          webhookConsumer: { address: '127.0.0.1' },
        });
        const all = {
          refs: [...before.refs, ...meanwhile.refs, ...after.refs],
          acknowledged: [...before.acknowledged, ...meanwhile.acknowledged, ...after.acknowledged],
          acknowledgedAfterFault: 0,
        };
        expect(await audit(db(), all)).toEqual({ lost: [], twice: [] });
        for (const instance of [inside, outside]) expect(await missingFromList(db(), instance, all)).toEqual([]);
      }, 600_000);
    },
  );

  /**
   * One instance's wall clock stepped an hour ahead under Debian's libfaketime (the monotonic clock
   * left alone, as after a real `date -s`), the two given boot ids of their own, as on two hosts.
   * On PostgreSQL a new boot's base takes its wall time from the database's clock (docs/postgres.md,
   * "Time"), so both compute one ledger time: the instance ahead reports its own wall clock an hour
   * off that time and no skew between the instances, never hands over a lease that is renewed through
   * the other, takes a lease over only once it has ended, and refuses a verification inside attempt
   * 1's window however far its own clock has run. Where libfaketime is not installed this block says
   * so and skips; CI sets LEDGER_REQUIRE_FAKETIME=1, so there it cannot be skipped.
   */
  const LIBFAKETIME = [
    '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1',
    '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1',
  ].find((file) => existsSync(file));
  if (!LIBFAKETIME) {
    if (process.env.LEDGER_REQUIRE_FAKETIME === '1')
      throw new Error('LEDGER_REQUIRE_FAKETIME=1 but libfaketime is not installed (apt-get install faketime)');
    process.stderr.write('postgres clock-step test skipped: libfaketime is not installed (apt-get install faketime)\n');
  }
  (LIBFAKETIME ? describe : describe.skip)('one instance with its wall clock stepped an hour ahead', () => {
    const LEASE_MS = 3_000;
    const CLOCK_INPUT = { customer_id: 'cus_clock', amount_cents: 1250, currency: 'EUR' };
    const clockInputHash = createHash('sha256').update(canonicalJson(CLOCK_INPUT)).digest('hex');
    const hosts = randomUUID().slice(0, 8);
    let behind: LedgerProcess;
    let ahead: LedgerProcess;
    beforeAll(async () => {
      const clocks = { ...env(), LEDGER_CLOCK_HEARTBEAT_MS: '250' };
      behind = await startLedger({ env: { ...clocks, LEDGER_CLOCK_BOOT_ID: `host-a-${hosts}` } });
      ahead = await startLedger({
        env: {
          ...clocks,
          LEDGER_CLOCK_BOOT_ID: `host-b-${hosts}`,
          LD_PRELOAD: LIBFAKETIME as string,
          FAKETIME: '+1h',
          FAKETIME_DONT_FAKE_MONOTONIC: '1',
        },
      });
    });
    afterAll(async () => {
      for (const instance of [behind, ahead]) {
        await instance?.stop();
        instance?.cleanup();
      }
    });

    type Item = { operation_ref: string; kind: string; lease: { id: string; holder: string; took_over_from?: string } };
    async function poll(instance: LedgerProcess, worker: string, waitMs: number): Promise<Item[]> {
      const answer = await request<{ items: Item[] }>(
        instance.baseUrl,
        'GET',
        `/v1/work?worker=${worker}&limit=100&wait_ms=${waitMs}&lease_ms=${LEASE_MS}`,
      );
      expect(answer.status).toBe(200);
      return answer.body.items;
    }
    const clockOf = async (instance: LedgerProcess) =>
      (await request(instance.baseUrl, 'GET', '/health/ready')).body?.details?.clock;
    const plan = (ref: string, dispatchTimeoutMs: number) =>
      ledgerAt(behind.baseUrl).submit(ref, [
        fact('StepPlanned', {
          run_id: ref.split('/')[0],
          tool: 'create_invoice',
          side_effect: 'write',
          input_hash: clockInputHash,
          input: CLOCK_INPUT,
          policy: { dispatch_timeout_ms: dispatchTimeoutMs, consistency_window_ms: 0 },
        }),
      ]);

    it("both compute the database's time and report no skew; the instance ahead reports its own clock an hour off it", async () => {
      const clock = await until(
        () => clockOf(ahead),
        // Take-overs are held until the peers have judged each other ("unjudged"); then allowed or held for a skew.
        (seen) =>
          (seen?.instances?.live_instances ?? 0) >= 2 &&
          (seen.instances.take_overs === 'allowed' || seen.instances.reason === 'skew'),
        'the instance ahead to have judged its clock against the other',
      );
      expect(clock).toMatchObject({
        status: 'up',
        state: 'ok',
        instances: { time_base: 'shared', skew_bound_ms: 1000, take_overs: 'allowed' },
      });
      expect(clock.instances.skew_ms).toBeLessThanOrEqual(clock.instances.skew_bound_ms);
      expect(clock.offset_ms).toBeGreaterThan(3_500_000);
      expect((await clockOf(behind)).offset_ms).toBeLessThan(60_000);
      const metrics = await (await fetch(`${ahead.baseUrl}/metrics`)).text();
      expect(metrics).toMatch(/^ledger_clock_take_overs_held 0$/m);
    });

    it('under load through both, the instance ahead never hands a renewed lease over, takes it only once ended, and refuses a premature verification; nothing lost or dispatched twice', async () => {
      const load = await runLoad([behind, ahead], async () => {
        // A worker holds an item through the instance behind and renews it; the instance ahead,
        // whose own clock says the lease ended an hour ago, must not hand it to another worker.
        const held = `run_${randomUUID().slice(0, 8)}/pg-clock-held`;
        ok(await plan(held, 1_000));
        const lease = (
          await until(
            () => poll(behind, 'w-behind', 500),
            (items) => items.some((item) => item.operation_ref === held),
            'the item on the instance behind',
          )
        ).find((item) => item.operation_ref === held)?.lease as Item['lease'];
        ok(
          await ledgerAt(behind.baseUrl, { 'ledger-lease': lease.id }).submit(held, [
            fact('AttemptDispatched', { attempt: 1, input_hash: clockInputHash }),
          ]),
        );
        for (let round = 0; round < 4; round++) {
          ok(
            await request(behind.baseUrl, 'POST', `${opPath(held)}/lease/renew`, {
              lease_id: lease.id,
              lease_ms: LEASE_MS,
            }),
          );
          expect((await poll(ahead, 'w-ahead', 1_000)).filter((item) => item.operation_ref === held)).toEqual([]);
          expect((await request(ahead.baseUrl, 'GET', `${opPath(held)}/lease`)).body).toMatchObject({
            held: true,
            holder: 'w-behind',
          });
        }
        // The worker stops renewing: the instance ahead takes the item over once the lease has ended.
        const taken = await until(
          () => poll(ahead, 'w-ahead', 1_000),
          (items) => items.some((item) => item.operation_ref === held),
          'the take-over once the lease ended',
        );
        expect(taken.find((item) => item.operation_ref === held)).toMatchObject({
          kind: 'verify',
          lease: { holder: 'w-ahead', took_over_from: 'w-behind' },
        });
        const record = await takeOverOf(database(), lease.id);
        expect(record).toMatchObject({ holder: 'w-ahead', took_over: { holder: 'w-behind' } });
        expect(record.acquired_at_ms).toBeGreaterThanOrEqual(record.took_over.expired_at_ms);
        // By the database's time, not the instance's own an hour ahead.
        expect(record.acquired_at_ms).toBeLessThan(Date.now() + 600_000);
        const heldEvents = (await ledgerAt(behind.baseUrl).events(held)).body.events as Array<{ type: string }>;
        expect(heldEvents.filter((event) => event.type === 'AttemptDispatched')).toHaveLength(1);
        expect(heldEvents.filter((event) => event.type === 'VerificationRecorded')).toEqual([]);

        // Attempt 1 granted through the instance behind: a not_found sent to the instance ahead is
        // refused as premature until the window has ended by the shared clock.
        const windowed = `run_${randomUUID().slice(0, 8)}/pg-clock-window`;
        ok(await plan(windowed, 3_000));
        ok(
          await ledgerAt(behind.baseUrl).submit(windowed, [
            fact('AttemptDispatched', { attempt: 1, input_hash: clockInputHash }),
          ]),
        );
        const refusals = new Set<string>();
        await until(
          async () => {
            const answer = await ledgerAt(ahead.baseUrl).submit(windowed, [
              fact('VerificationRecorded', { outcome: 'not_found', checked_at: new Date().toISOString() }),
            ]);
            if (answer.status !== 200) refusals.add(`${answer.status} ${answer.body?.code}`);
            return answer.status;
          },
          (status) => status === 200,
          'the not_found taken once the window has ended',
        );
        expect([...refusals]).toEqual(['409 VERIFICATION_PREMATURE']);
        const events = (await ledgerAt(behind.baseUrl).events(windowed)).body.events as Array<{
          type: string;
          recorded_at: string;
          data: { call_deadline?: string };
        }>;
        const deadline = Date.parse(
          events.find((event) => event.type === 'AttemptDispatched')?.data.call_deadline as string,
        );
        const verified = events.find((event) => event.type === 'VerificationRecorded') as { recorded_at: string };
        expect(Date.parse(verified.recorded_at)).toBeGreaterThanOrEqual(deadline);
        expect(Date.parse(verified.recorded_at)).toBeLessThan(deadline + 600_000);
      });
      expect(await audit(database(), load)).toEqual({ lost: [], twice: [] });
      for (const instance of [behind, ahead]) expect(await missingFromList(database(), instance, load)).toEqual([]);
    });
  });
});
