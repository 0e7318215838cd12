/**
 * The service on PostgreSQL (LEDGER_STORE=postgres, docs/postgres.md), built from source in this
 * process: one tool step through plan, dispatch, an unknown outcome and its verification, each
 * answer given after its COMMIT, the log read back from the database; then a second instance on the
 * same database, with a data directory of its own, answers the same operation from the shared log.
 */
import { operationStream } from '../../src/store/stream-names';
import { PostgresEventStore } from '../../src/adapters/postgres/postgres-event-store.adapter';
import { ledgerAt, request } from '../support/http';
import { startLedgerInProcess, type InProcessLedger } from '../support/ledger-in-process';
import { describeWithPostgres } from '../support/postgres';
import { envelopes, ok, operation, uniqueRef } from '../support/scenario';
import { until } from '../support/until';

const TENANT = 'default'; // local mode

describeWithPostgres('the service on PostgreSQL', (database) => {
  const started: InProcessLedger[] = [];
  const start = async () => {
    const ledger = await startLedgerInProcess({
      env: { LEDGER_STORE: 'postgres', DATABASE_URL: database().url },
    });
    started.push(ledger);
    return ledger;
  };
  afterAll(async () => {
    for (const ledger of started.splice(0)) {
      await ledger.stop();
      ledger.cleanup();
    }
  });

  it('takes a tool step through plan, dispatch, an unknown outcome and its verification', async () => {
    const ledger = await start();
    const ref = uniqueRef('pg-step');
    const op = operation(ledgerAt(ledger.baseUrl), ref);

    expect(ok(await op.plan()).state.status).toBe('planned');
    expect(ok(await op.dispatch(1)).state.status).toBe('dispatched');
    const unknown = ok(await op.record(1, envelopes.outcomeUnknown(ref)));
    expect(unknown.state.status).toBe('verifying');
    // A second dispatch before the verification is refused: the gate holds on this store too.
    expect((await op.dispatch(2)).body.code).toBe('VERIFY_BEFORE_RETRY');
    const verified = ok(await op.verify('found_committed', { result: { invoice_id: 'inv_123' } }));
    expect(verified.state.status).toBe('succeeded');

    // What the service acknowledged is in the database, in order, each fact once.
    const log = new PostgresEventStore({ connectionString: database().url });
    try {
      const stream = await log.readStream(operationStream(TENANT, ref));
      expect(stream.map((event) => event.type)).toEqual(expect.arrayContaining(['StepPlanned', 'AttemptDispatched']));
      expect(stream.map((event) => event.revision)).toEqual(stream.map((_, index) => index));
      expect(stream[stream.length - 1].position).toBe(verified.position);
      expect(new Set(stream.map((event) => event.event_id)).size).toBe(stream.length);
    } finally {
      await log.close();
    }

    // The readiness probe reads the store.
    expect((await request(ledger.baseUrl, 'GET', '/health/ready')).status).toBe(200);
  });

  it('answers from a second instance on the same database what the first one wrote', async () => {
    const [first] = started.length > 0 ? started : [await start()];
    const second = await start();
    const ref = uniqueRef('pg-shared');
    const one = operation(ledgerAt(first.baseUrl), ref);
    const two = operation(ledgerAt(second.baseUrl), ref);
    ok(await one.plan());
    ok(await one.dispatch(1));
    // The second instance decides on the stream as the first left it: attempt 1 is still in flight.
    const again = await two.dispatch(2);
    expect({ status: again.status, code: again.body.code }).toEqual({ status: 409, code: 'ATTEMPT_IN_FLIGHT' });
    ok(await two.record(1, envelopes.success(ref)));
    const state = await until(
      async () => ok(await one.state()),
      (body) => body.status === 'succeeded',
      'the first instance to read the outcome the second recorded',
    );
    expect(state.status).toBe('succeeded');
  });
});
