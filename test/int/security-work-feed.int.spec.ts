/**
 * Who may use the work feed and what of a lease a reader sees (docs/work-feed.md, docs/security.md),
 * over real HTTP against the built service: a credential-shaped worker name is refused and nothing
 * is leased; only runtime keys take, renew and release; the live lease id is in no read answer; and
 * a lease renews and releases only for the key it was granted to.
 */
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { fact, opPath, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

const RUNTIME_KEY = `feed-runtime-${randomUUID()}`;
const RUNTIME_KEY_2 = `feed-runtime2-${randomUUID()}`;
const APPROVER_KEY = `feed-approver-${randomUUID()}`;
const AUDITOR_KEY = `feed-auditor-${randomUUID()}`;
// One step per part, each for a tool of its own, so no part's outcome changes what another finds.
const NAME_TOOL = 'feed_name_tool';
const NAME_REF = 'run_feed_sec/name';
const ROLE_TOOL = 'feed_role_tool';
const ROLE_REF = 'run_feed_sec/role';
const TOOL = 'feed_sec_tool';
const REF = 'run_feed_sec/step_1';
const WORKER = 'worker-feed-sec';
// Shapes of real credentials (AWS's documented example id; a GitHub token's shape).
const AWS_ID = 'AKIAIOSFODNN7EXAMPLE';
const GITHUB_TOKEN = `ghp_${'a1B2c3D4e5F6g7H8i9J0'.repeat(2).slice(0, 36)}`;

let ledger: LedgerProcess;
const as = (key: string) => ({ authorization: `Bearer ${key}` });
const get = (path: string, key: string) => request(ledger.baseUrl, 'GET', path, undefined, as(key));
const post = (path: string, body: unknown, key: string, headers: Record<string, string> = {}) =>
  request(ledger.baseUrl, 'POST', path, body, { ...as(key), ...headers });

beforeAll(async () => {
  ledger = await startLedger({
    env: {
      LEDGER_API_KEYS: [
        `${RUNTIME_KEY}:runtime:acme`,
        `${RUNTIME_KEY_2}:runtime:acme`,
        `${APPROVER_KEY}:approver:acme`,
        `${AUDITOR_KEY}:auditor:acme`,
      ].join(','),
      LEDGER_RATE_LIMIT_PER_MINUTE: '10000000',
    },
  });
  for (const [ref, tool] of [
    [NAME_REF, NAME_TOOL],
    [ROLE_REF, ROLE_TOOL],
    [REF, TOOL],
  ]) {
    const planned = await post(
      `${opPath(ref)}/events`,
      {
        events: [
          fact('StepPlanned', { run_id: 'run_feed_sec', tool, side_effect: 'write', input_hash: 'sha256:feed-sec' }),
        ],
      },
      RUNTIME_KEY,
    );
    expect(planned.status).toBe(200);
  }
}, 60_000);

afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
});

describe('the worker name', () => {
  test.each([
    ['an AWS access key id', AWS_ID],
    ['a GitHub token', GITHUB_TOKEN],
    ['a secret by its name', 'token=abcdef0123456789'],
  ])('%s as ?worker= is refused 422 SECRET_IN_IDENTIFIER, never echoed, nothing leased', async (_name, worker) => {
    const answer = await get(`/v1/work?worker=${encodeURIComponent(worker)}&tool=${NAME_TOOL}&wait_ms=0`, RUNTIME_KEY);
    expect(answer.status).toBe(422);
    expect(answer.contentType).toMatch(/^application\/problem\+json/);
    expect(answer.body).toMatchObject({ code: 'SECRET_IN_IDENTIFIER', field: 'worker' });
    expect(JSON.stringify(answer.body)).not.toContain(worker);
    expect((await get(`${opPath(NAME_REF)}/lease`, AUDITOR_KEY)).body).toEqual({ held: false });
  });

  test.each(['<script>', '-leading-dash', 'quote"d', 'a'.repeat(201)])(
    'a name outside the identifier grammar (%p) is a 400 naming worker',
    async (worker) => {
      const answer = await get(
        `/v1/work?worker=${encodeURIComponent(worker)}&tool=${NAME_TOOL}&wait_ms=0`,
        RUNTIME_KEY,
      );
      expect(answer.status).toBe(400);
      expect(answer.body).toMatchObject({ code: 'BAD_REQUEST', field: 'worker' });
      expect((await get(`${opPath(NAME_REF)}/lease`, AUDITOR_KEY)).body).toEqual({ held: false });
    },
  );
});

describe('only runtime keys use the feed', () => {
  test('an approver or an auditor key may not take, renew or release work items (403), and takes nothing', async () => {
    for (const key of [APPROVER_KEY, AUDITOR_KEY]) {
      const taken = await get(`/v1/work?tool=${ROLE_TOOL}&wait_ms=0`, key);
      expect(taken.status).toBe(403);
      expect(taken.body.code).toBe('FORBIDDEN');
      for (const action of ['renew', 'release']) {
        const answer = await post(`${opPath(ROLE_REF)}/lease/${action}`, { lease_id: randomUUID() }, key);
        expect(answer.status).toBe(403);
        expect(answer.body.code).toBe('FORBIDDEN');
      }
    }
    expect((await get(`${opPath(ROLE_REF)}/lease`, AUDITOR_KEY)).body).toEqual({ held: false });
  });
});

describe('the lease id stays with the key it was granted to', () => {
  let leaseId: string;

  test('no read answer carries the live lease id; the evidence keeps the holder', async () => {
    const taken = await get(`/v1/work?worker=${WORKER}&tool=${TOOL}&wait_ms=2000&lease_ms=600000`, RUNTIME_KEY);
    expect(taken.status).toBe(200);
    expect(taken.body.items).toHaveLength(1);
    leaseId = taken.body.items[0].lease.id;
    const dispatched = await post(
      `${opPath(REF)}/events`,
      { events: [fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:feed-sec' })] },
      RUNTIME_KEY,
      { 'ledger-lease': leaseId },
    );
    expect(dispatched.status).toBe(200);

    const evidence = await get(
      `${opPath(REF)}/evidence?wait_for_position=${dispatched.body.position}&wait_timeout_ms=20000`,
      AUDITOR_KEY,
    );
    expect(evidence.status).toBe(200);
    const entry = evidence.body.entries.find((each: { type: string }) => each.type === 'AttemptDispatched');
    expect(entry.worker).toEqual({ holder: WORKER, current: true });
    const reads = [
      evidence,
      await get(`${opPath(REF)}/events`, AUDITOR_KEY),
      await get(opPath(REF), AUDITOR_KEY),
      await get(`${opPath(REF)}/lease`, AUDITOR_KEY),
      await get(`/v1/leases?operation_ref=${encodeURIComponent(REF)}`, AUDITOR_KEY),
      await get(`/v1/recovery`, AUDITOR_KEY),
      await get(`/v1/operations?run_id=run_feed_sec`, AUDITOR_KEY),
      await get(`/v1/runs/run_feed_sec`, AUDITOR_KEY),
      await get(`/v1/triage`, AUDITOR_KEY),
    ];
    for (const answer of reads) {
      expect(answer.status).toBe(200);
      expect(JSON.stringify(answer.body)).not.toContain(leaseId);
    }
    // The log itself keeps it (the drain's check of interleaving reads it there): only answers leave it out.
    const db = new Database(join(ledger.dataDir, 'events.sqlite'), { readonly: true, fileMustExist: true });
    try {
      const rows = db.prepare("SELECT metadata FROM events WHERE type = 'AttemptDispatched'").all() as Array<{
        metadata: string;
      }>;
      expect(JSON.parse(rows[0].metadata).lease).toMatchObject({ lease_id: leaseId, holder: WORKER, current: true });
    } finally {
      db.close();
    }
  });

  test('another key of the tenant holding the id can neither renew nor release it (409 LEASE_LOST)', async () => {
    for (const action of ['renew', 'release']) {
      const answer = await post(`${opPath(REF)}/lease/${action}`, { lease_id: leaseId }, RUNTIME_KEY_2);
      expect(answer.status).toBe(409);
      expect(answer.body.code).toBe('LEASE_LOST');
    }
    expect((await get(`${opPath(REF)}/lease`, AUDITOR_KEY)).body).toMatchObject({ held: true, holder: WORKER });
    // The key it was granted to still renews and releases it.
    const renewed = await post(`${opPath(REF)}/lease/renew`, { lease_id: leaseId, lease_ms: 60_000 }, RUNTIME_KEY);
    expect(renewed.status).toBe(200);
    expect(renewed.body.lease).toMatchObject({ id: leaseId, holder: WORKER });
    const released = await post(`${opPath(REF)}/lease/release`, { lease_id: leaseId }, RUNTIME_KEY);
    expect(released.body).toEqual({ released: true });
  });
});
