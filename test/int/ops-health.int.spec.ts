/**
 * /health/live and /health/ready on the built service: liveness never depends on the store,
 * readiness fails while the store is unreachable or the projections lag past the configured bound,
 * and neither needs a key nor shows an internal.
 */
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { fact, request } from '../support/http';
import { freePort } from '../support/ledger-process';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';
import { until } from '../support/until';

/** The service's read model file (READ_MODEL_FILE of src/projection-engine/projections.module.ts, whose NestJS imports jest cannot load). */
const READ_MODEL_FILE = 'read-models.sqlite';

const KEY = 'ops-health-runtime-key-01';

describe('health on a service with a working store', () => {
  let ledger: LedgerProcess;

  beforeAll(async () => {
    // A short lag bound, so a projection that cannot write shows as not ready within the test.
    ledger = await startLedger({ env: { LEDGER_API_KEYS: `${KEY}:runtime:acme`, LEDGER_READY_MAX_LAG_MS: '500' } });
  });

  afterAll(async () => {
    await ledger.stop();
    ledger.cleanup();
  });

  it('live and ready answer 200 without a key', async () => {
    const live = await request(ledger.baseUrl, 'GET', '/health/live');
    expect(live.status).toBe(200);
    expect(live.body).toEqual({ status: 'ok', info: {}, error: {}, details: {} });
    const ready = await request(ledger.baseUrl, 'GET', '/health/ready');
    expect(ready.status).toBe(200);
    expect(ready.body.status).toBe('ok');
    expect(ready.body.details.store).toEqual({ status: 'up' });
    expect(ready.body.details.projections).toMatchObject({ status: 'up', max_lag_ms: 500 });
  });

  it('readiness fails while the projections cannot keep up, and recovers when they catch up', async () => {
    // Another connection holds the read model's write lock: the engine's next batch cannot commit.
    const lock = new Database(join(ledger.dataDir, READ_MODEL_FILE));
    lock.pragma('busy_timeout = 5000');
    lock.exec('BEGIN EXCLUSIVE');
    try {
      const ref = `run_${randomUUID().slice(0, 8)}/step_1`;
      const submitted = await request(
        ledger.baseUrl,
        'POST',
        `/v1/operations/${encodeURIComponent(ref)}/events`,
        {
          events: [
            fact('StepPlanned', { run_id: 'run_h', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1' }),
          ],
        },
        { authorization: `Bearer ${KEY}` },
      );
      expect(submitted.status).toBe(200);
      const notReady = await until(
        () => request(ledger.baseUrl, 'GET', '/health/ready'),
        (answer) => answer.status === 503,
        'readiness to fail',
        30_000,
      );
      expect(notReady.body.status).toBe('error');
      expect(notReady.body.details.store).toEqual({ status: 'up' });
      expect(notReady.body.error.projections.status).toBe('down');
      // The public answer names the condition, never a driver's message or a file.
      expect(JSON.stringify(notReady.body)).not.toMatch(/SQLITE|sqlite|\/tmp\//);
      // Liveness is unaffected: restarting the process would not help.
      expect((await request(ledger.baseUrl, 'GET', '/health/live')).status).toBe(200);
    } finally {
      lock.exec('ROLLBACK');
      lock.close();
    }
    const ready = await until(
      () => request(ledger.baseUrl, 'GET', '/health/ready'),
      (answer) => answer.status === 200,
      'readiness to come back',
      30_000,
    );
    expect(ready.body.details.projections).toMatchObject({ status: 'up', events_behind: 0 });
  });
});

describe('health on a service whose store cannot be reached', () => {
  let ledger: LedgerProcess;

  beforeAll(async () => {
    // An EventStoreDB address where nothing listens: the service starts, the store is down.
    const closedPort = await freePort();
    ledger = await startLedger({
      env: {
        LEDGER_STORE: 'eventstoredb',
        EVENTSTORE_CONNECTION_STRING: `esdb://127.0.0.1:${closedPort}?tls=false`,
        LEDGER_HEALTH_TIMEOUT_MS: '3000',
      },
    });
  });

  afterAll(async () => {
    await ledger.stop();
    ledger.cleanup();
  });

  it('is live but not ready, and says the store is the reason', async () => {
    expect((await request(ledger.baseUrl, 'GET', '/health/live')).status).toBe(200);
    const ready = await request(ledger.baseUrl, 'GET', '/health/ready');
    expect(ready.status).toBe(503);
    expect(ready.contentType).toMatch(/^application\/json/);
    expect(ready.body.status).toBe('error');
    expect(ready.body.error.store).toEqual({ status: 'down', message: 'the event store is unreachable' });
    expect(JSON.stringify(ready.body)).not.toMatch(/ECONNREFUSED|127\.0\.0\.1/);
  });
});
