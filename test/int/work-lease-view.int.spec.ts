/**
 * Who holds an operation (GET /v1/operations/{ref}/lease), over real HTTP against the built
 * service: a step planned, leased by a named worker through the work feed, read by an auditor of
 * the tenant (holder and expiry shown, the lease id never), taken over after expiry by another
 * worker, released; another tenant's key gets 404 for it and learns nothing of the worker.
 */
import { randomUUID } from 'node:crypto';
import { fact, opPath, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

const RUNTIME_KEY = 'lease-view-runtime-key-00001';
const AUDITOR_KEY = 'lease-view-auditor-key-00001';
const GLOBEX_KEY = 'lease-view-globex-key-000001';
const TOOL = 'lease_view_tool';
const REF = `run_lease/${randomUUID().slice(0, 8)}`;
const WORKER_A = 'worker-lease-view-a';
const WORKER_B = 'worker-lease-view-b';

let ledger: LedgerProcess;
const as = (key: string) => ({ authorization: `Bearer ${key}` });
const leaseOf = (ref: string, key = AUDITOR_KEY) =>
  request(ledger.baseUrl, 'GET', `${opPath(ref)}/lease`, undefined, as(key));
const take = async (worker: string, leaseMs: number) => {
  const answer = await request(
    ledger.baseUrl,
    'GET',
    `/v1/work?worker=${worker}&tool=${TOOL}&wait_ms=5000&lease_ms=${leaseMs}`,
    undefined,
    as(RUNTIME_KEY),
  );
  expect(answer.status).toBe(200);
  expect(answer.body.items.map((item: { operation_ref: string }) => item.operation_ref)).toEqual([REF]);
  return answer.body.items[0].lease as { id: string; holder: string; expires_at: string; took_over_from?: string };
};

beforeAll(async () => {
  ledger = await startLedger({
    env: { LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${AUDITOR_KEY}:auditor:acme,${GLOBEX_KEY}:runtime:globex` },
  });
  const planned = await request(
    ledger.baseUrl,
    'POST',
    `${opPath(REF)}/events`,
    {
      events: [
        fact('StepPlanned', { run_id: 'run_lease', tool: TOOL, side_effect: 'write', input_hash: 'sha256:lease-view' }),
      ],
    },
    as(RUNTIME_KEY),
  );
  expect(planned.status).toBe(200);
}, 60_000);

afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
});

describe('GET /v1/operations/{ref}/lease', () => {
  it('shows no holder before any worker took the step', async () => {
    const answer = await leaseOf(REF);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ held: false });
  });

  it('shows the worker holding it and until when, to a reader of the tenant, without the lease id', async () => {
    const lease = await take(WORKER_A, 60_000);
    const answer = await leaseOf(REF);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ held: true, holder: WORKER_A, expires_at: lease.expires_at });
    // The id is all renew and release ask for: a reader must not get it.
    expect(JSON.stringify(answer.body)).not.toContain(lease.id);

    // Another tenant's key: as if the operation did not exist, and nothing of its worker.
    const other = await leaseOf(REF, GLOBEX_KEY);
    expect(other.status).toBe(404);
    expect(other.contentType).toMatch(/^application\/problem\+json/);
    expect(other.body.code).toBe('OPERATION_NOT_FOUND');
    expect(JSON.stringify(other.body)).not.toContain(WORKER_A);

    // A list page asks for all its rows in one read; another tenant reads nothing held under the same refs.
    const listQuery = `/v1/leases?operation_ref=${encodeURIComponent(REF)}&operation_ref=${encodeURIComponent('run_lease/other')}`;
    const listed = await request(ledger.baseUrl, 'GET', listQuery, undefined, as(AUDITOR_KEY));
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual({
      items: [
        { operation_ref: REF, held: true, holder: WORKER_A, expires_at: lease.expires_at },
        { operation_ref: 'run_lease/other', held: false },
      ],
    });
    expect(JSON.stringify(listed.body)).not.toContain(lease.id);
    const otherList = await request(ledger.baseUrl, 'GET', listQuery, undefined, as(GLOBEX_KEY));
    expect(otherList.body.items).toEqual([
      { operation_ref: REF, held: false },
      { operation_ref: 'run_lease/other', held: false },
    ]);

    const released = await request(
      ledger.baseUrl,
      'POST',
      `${opPath(REF)}/lease/release`,
      { lease_id: lease.id },
      as(RUNTIME_KEY),
    );
    expect(released.body).toEqual({ released: true });
    expect((await leaseOf(REF)).body).toEqual({ held: false });
  });

  it('names whose expired lease a new holder took over, and shows no holder while a released item is on hold', async () => {
    await take(WORKER_A, 1000);
    await new Promise((resolveWait) => setTimeout(resolveWait, 1200));
    // Expired and not yet taken: nobody holds it.
    expect((await leaseOf(REF)).body).toEqual({ held: false });
    const lease = await take(WORKER_B, 60_000);
    expect(lease.took_over_from).toBe(WORKER_A);
    expect((await leaseOf(REF)).body).toEqual({
      held: true,
      holder: WORKER_B,
      expires_at: lease.expires_at,
      took_over_from: WORKER_A,
    });

    // Released with a hold: the item is kept from everyone, yet no worker holds it.
    await request(
      ledger.baseUrl,
      'POST',
      `${opPath(REF)}/lease/release`,
      { lease_id: lease.id, hold_ms: 60_000 },
      as(RUNTIME_KEY),
    );
    expect((await leaseOf(REF)).body).toEqual({ held: false });
  });

  it('answers 404 for an operation the tenant does not have, and a typed 400 for a malformed ref', async () => {
    const missing = await leaseOf('run_lease/no_such_step');
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe('OPERATION_NOT_FOUND');
    const tooMany = await request(
      ledger.baseUrl,
      'GET',
      `/v1/leases?${Array.from({ length: 101 }, (_, i) => `operation_ref=r_${i}`).join('&')}`,
      undefined,
      as(AUDITOR_KEY),
    );
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.code).toBe('BAD_REQUEST');
    expect((await request(ledger.baseUrl, 'GET', '/v1/leases', undefined, as(AUDITOR_KEY))).body).toEqual({
      items: [],
    });
    const bad = await request(
      ledger.baseUrl,
      'GET',
      `/v1/operations/${encodeURIComponent(' leading_space')}/lease`,
      undefined,
      as(AUDITOR_KEY),
    );
    expect(bad.status).toBe(400);
    expect(bad.contentType).toMatch(/^application\/problem\+json/);
  });
});
