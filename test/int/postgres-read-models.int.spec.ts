/**
 * The read models projected once for every instance on PostgreSQL (docs/postgres.md, "Read
 * models"): two instances built from source in this process on one database, one elected to
 * project, the other copying what it publishes; both answer the same lists, a read on one waits
 * for a write acknowledged by the other (docs/contract.md §5), a read past what was published
 * answers the same 503 as on one instance, and when the projector stops the other takes over.
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { fact, ledgerAt, request } from '../support/http';
import { startLedgerInProcess, type InProcessLedger } from '../support/ledger-in-process';
import { describeWithPostgres } from '../support/postgres';
import { until } from '../support/until';

const PROJECTOR_LOCK = 4_712_003;

describeWithPostgres('read models projected once for every instance on PostgreSQL', (database) => {
  const started: InProcessLedger[] = [];
  const start = async () => {
    const ledger = await startLedgerInProcess({ env: { LEDGER_STORE: 'postgres', DATABASE_URL: database().url } });
    started.push(ledger);
    return ledger;
  };
  afterAll(async () => {
    for (const ledger of started.splice(0)) {
      await ledger.stop();
      ledger.cleanup();
    }
  });

  const role = async (ledger: InProcessLedger): Promise<string | undefined> =>
    (await request(ledger.baseUrl, 'GET', '/health/ready')).body?.details?.projections?.read_models;

  const projectorSessions = async (): Promise<number> => {
    const client = new Client({ connectionString: database().url });
    await client.connect();
    try {
      const { rows } = await client.query<{ n: string }>(
        "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND granted",
        [PROJECTOR_LOCK],
      );
      return Number(rows[0].n);
    } finally {
      await client.end();
    }
  };

  /** Plans a step of `run` on `ledger` (and dispatches it when asked); answers the position acknowledged. */
  const step = async (ledger: InProcessLedger, run: string, index: number, dispatch: boolean): Promise<number> => {
    const client = ledgerAt(ledger.baseUrl);
    const ref = `${run}/step_${index}`;
    const planned = await client.submit(ref, [
      fact('StepPlanned', {
        run_id: run,
        tool: index % 2 ? 'send_email' : 'create_invoice',
        side_effect: 'write',
        input_hash: `h${index}`,
      }),
    ]);
    expect(planned.status).toBe(200);
    if (!dispatch) return planned.body.position as number;
    const dispatched = await client.submit(ref, [fact('AttemptDispatched', { attempt: 1, input_hash: `h${index}` })]);
    expect(dispatched.status).toBe(200);
    return dispatched.body.position as number;
  };

  const operations = (ledger: InProcessLedger, run: string, position: number, extra = '') =>
    request(ledger.baseUrl, 'GET', `/v1/operations?run_id=${run}&wait_for_position=${position}${extra}`);

  it('elects one projector; both instances answer the same lists, each waiting for the other one’s writes', async () => {
    const a = await start();
    const b = await start();
    const roles = await until(
      async () => [await role(a), await role(b)],
      (both) => both.includes('projector') && both.includes('copy'),
      'one instance to project and the other to copy',
    );
    expect(roles.sort()).toEqual(['copy', 'projector']);
    expect(await projectorSessions()).toBe(1);

    const run = `run_${randomUUID().slice(0, 8)}`;
    // Written through both instances in turn; each read names the last position its writer acknowledged.
    for (let index = 0; index < 6; index++) {
      const writer = index % 2 ? b : a;
      const reader = index % 2 ? a : b;
      const position = await step(writer, run, index, index < 2);
      const read = await operations(reader, run, position);
      expect(read.status).toBe(200);
      expect(read.body.items.map((item: { operation_ref: string }) => item.operation_ref)).toContain(
        `${run}/step_${index}`,
      );
      expect(read.body.as_of_position).toBeGreaterThanOrEqual(position);
    }
    const last = await step(a, run, 6, false);
    const [fromA, fromB] = await Promise.all([operations(a, run, last), operations(b, run, last)]);
    expect(fromA.status).toBe(200);
    expect(fromA.body.items).toHaveLength(7);
    expect(fromB.body.items).toEqual(fromA.body.items);
    const dispatched = await operations(b, run, last, '&status=dispatched');
    expect(dispatched.body.items.map((item: { operation_ref: string }) => item.operation_ref).sort()).toEqual([
      `${run}/step_0`,
      `${run}/step_1`,
    ]);
    const runs = await Promise.all(
      [a, b].map((ledger) => request(ledger.baseUrl, 'GET', `/v1/runs/${run}?wait_for_position=${last}`)),
    );
    expect(runs[0].status).toBe(200);
    expect(runs[1].body).toEqual(runs[0].body);
  });

  it('answers PROJECTION_LAGGING on a copy when the position asked is not published within the wait', async () => {
    const [, b] = started;
    const head = await step(b, `run_${randomUUID().slice(0, 8)}`, 0, false);
    const answer = await request(
      b.baseUrl,
      'GET',
      `/v1/operations?wait_for_position=${head * 2 + 1_000_000}&wait_timeout_ms=200`,
    );
    expect(answer.status).toBe(503);
    expect(answer.body.code).toBe('PROJECTION_LAGGING');
  });

  it('hands the projection to the other instance when the projector stops', async () => {
    const [a, b] = started;
    const projector = (await role(a)) === 'projector' ? a : b;
    const other = projector === a ? b : a;
    await projector.stop();
    started.splice(started.indexOf(projector), 1);
    projector.cleanup();
    await until(
      () => role(other),
      (current) => current === 'projector',
      'the remaining instance to project',
    );
    const run = `run_${randomUUID().slice(0, 8)}`;
    const position = await step(other, run, 0, true);
    const read = await operations(other, run, position);
    expect(read.status).toBe(200);
    expect(read.body.items).toHaveLength(1);
    expect(await projectorSessions()).toBe(1);
  });
});
