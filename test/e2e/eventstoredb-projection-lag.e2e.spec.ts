/**
 * Readiness and /metrics of the built service on EventStoreDB (the protocol double, whose positions
 * are `$all` commit positions: byte offsets, as on a real server). `events_behind` is a count of
 * events or nothing, never a difference of two positions: once the projections have applied every
 * operation event it is 0, even when $all has moved on with records no projection reads (the work
 * feed's lease streams).
 */
import { randomUUID } from 'node:crypto';
import { NO_STREAM } from '../../src/store/event-store.port';
import { newEvent } from '../contract/event-store.contract';
import { startCli } from '../support/cli-harness';
import { fact, ledgerAt, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { eventStoreDbStore } from '../support/store-setup';
import { until } from '../support/until';

const store = eventStoreDbStore();
let ledger: LedgerProcess;

beforeAll(async () => {
  await store.start();
  ledger = await startLedger({ env: store.env() });
});

afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
  await store.stop();
});

test('readiness and the lag metric count events, not positions, once the projections have caught up', async () => {
  const ref = `run_${randomUUID().slice(0, 8)}/step_1`;
  const planned = await ledgerAt(ledger.baseUrl).submit(ref, [
    fact('StepPlanned', { run_id: 'run_lag', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1' }),
  ]);
  expect(planned.status).toBe(200);
  const position = planned.body.position as number;

  // Another application's event lands after it: $all's head moves past the projections' checkpoint.
  // (The lease and clock streams the adapter keeps are passed over by every read of the log, the head's too.)
  await store.store.append(`elsewhere-${randomUUID()}`, NO_STREAM, [newEvent('SomethingElse')]);
  expect(await store.store.headPosition()).toBeGreaterThan(position);

  // Counted as caught up once every projection has applied the plan; a difference of positions never would be.
  const ready = await until(
    () => request(ledger.baseUrl, 'GET', '/health/ready'),
    (answer) => answer.status === 200 && answer.body.details.projections.events_behind === 0,
    'the projections to be reported caught up',
  );
  expect(ready.body.details.projections).toMatchObject({ status: 'up', state: 'live', lag_ms: 0, events_behind: 0 });

  const metrics = await request(ledger.baseUrl, 'GET', '/metrics');
  expect(metrics.status).toBe(200);
  const lagEvents = [...String(metrics.body).matchAll(/^ledger_projection_lag_events\{[^}]*\} (\S+)$/gm)].map((match) =>
    Number(match[1]),
  );
  expect(lagEvents.length).toBeGreaterThan(0);
  expect(lagEvents.every((value) => value === 0)).toBe(true);
});

test('`projections rebuild --url` on this store ends once the projections have caught up, lease records after them or not', async () => {
  await store.store.append(`lease-${randomUUID()}`, NO_STREAM, [newEvent('LeaseChanged')]);
  // Asynchronous: the double this service writes to runs in this process and must keep answering.
  const cli = startCli(['projections', 'rebuild', '--progress', 'never', '--url', ledger.baseUrl]);
  const timer = setTimeout(() => cli.child.kill(), 30_000);
  const code = await cli.exited;
  clearTimeout(timer);
  expect({ code, stderr: cli.stderr() }).toEqual({ code: 0, stderr: '' });
  expect(cli.stdout()).toMatch(
    new RegExp(`^rebuilt step_state, evidence_trail, run_summary, trust_metrics on ${ledger.baseUrl} in `),
  );
});
