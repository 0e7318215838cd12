/**
 * The reads the console is built on, over real HTTP against the built service: the triage queue
 * (kinds, thresholds, filters, counts, pages, typed refusals), the runs list, the operations list's
 * text and trust filters, and the long poll that tells a page the log moved.
 */
import { randomUUID } from 'node:crypto';
import { request } from '../support/http';
import { incidentsAt } from '../support/incidents';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

const RUNTIME_KEY = 'triage-runtime-key-00000001';
const OTHER_KEY = 'triage-globex-key-000000001';
const RUN = `run_${randomUUID().slice(0, 6)}`;
let ledger: LedgerProcess;
let head = 0;

const get = (path: string, key = RUNTIME_KEY) =>
  request(ledger.baseUrl, 'GET', path, undefined, { authorization: `Bearer ${key}` });

beforeAll(async () => {
  ledger = await startLedger({ env: { LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${OTHER_KEY}:runtime:globex` } });
  const ops = incidentsAt(ledger.baseUrl, RUNTIME_KEY);
  await ops.escalated(`${RUN}/pay_1`, RUN, 'pay_invoice');
  await ops.awaitingApproval(`${RUN}/refund_1`, RUN, 'refund');
  // Its plan's consistency window outlasts the test: by default it waits, and is not yet listed.
  await ops.verifying(`${RUN}/invoice_1`, RUN, 'create_invoice', { consistency_window_ms: 600_000 });
  await ops.dispatched(`${RUN}/email_1`, RUN, 'send_email');
  await ops.succeeded(`${RUN}/email_2`, RUN, 'send_email');
  // The last write of all: a read waiting for its position sees both tenants' steps.
  head = await incidentsAt(ledger.baseUrl, OTHER_KEY).escalated(`${RUN}/pay_1`, RUN, 'globex_tool');
}, 60_000);

afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
});

describe('GET /v1/triage', () => {
  it('lists escalations and approvals at once, and the timed kinds only past their thresholds', async () => {
    const byDefault = await get(`/v1/triage?wait_for_position=${head}`);
    expect(byDefault.status).toBe(200);
    expect(byDefault.body.items.map((item: { kind: string }) => item.kind)).toEqual(['awaiting_approval', 'escalated']);
    expect(byDefault.body.waiting).toEqual([
      expect.objectContaining({
        operation_ref: `${RUN}/invoice_1`,
        threshold_ms: 600_000,
        threshold_from: 'policy',
        reason: 'OUTCOME_UNKNOWN',
      }),
    ]);
    expect(byDefault.body.thresholds).toEqual({
      unknown_after_ms: 30_000,
      dispatch_timeout_ms: 300_000,
      retry_grace_ms: 60_000,
      input_after_ms: 1_800_000,
    });

    const short = await get('/v1/triage?unknown_after_ms=0&dispatch_timeout_ms=0');
    expect(
      short.body.items.map((item: { operation_ref: string; kind: string }) => `${item.kind} ${item.operation_ref}`),
    ).toEqual([
      `dispatch_overdue ${RUN}/email_1`,
      `unknown_outcome ${RUN}/invoice_1`,
      `awaiting_approval ${RUN}/refund_1`,
      `escalated ${RUN}/pay_1`,
    ]);
    expect(short.body.counts).toEqual({
      total: 4,
      by_kind: {
        possible_duplicate: 0,
        escalated: 1,
        awaiting_approval: 1,
        unknown_outcome: 1,
        dispatch_overdue: 1,
        retry_overdue: 0,
        input_awaited: 0,
        acknowledged: 0,
      },
      by_tool: { send_email: 1, create_invoice: 1, refund: 1, pay_invoice: 1 },
      by_reason: { ATTEMPT_DISPATCHED: 1, OUTCOME_UNKNOWN: 1, MISSING_APPROVAL: 1, INVOICE_ALREADY_PAID: 1 },
    });
    expect(short.body.items[0]).toMatchObject({
      threshold_ms: 0,
      threshold_from: 'query',
      run_id: RUN,
      tool: 'send_email',
    });
    // Another tenant's escalation of the same ref is not in this tenant's queue, nor the reverse.
    const other = await get('/v1/triage', OTHER_KEY);
    expect(other.body.items.map((item: { tool: string }) => item.tool)).toEqual(['globex_tool']);
  });

  it('filters by kind, tool, run, reason and text on the ref; counts follow the filters; pages with a cursor', async () => {
    const q = '/v1/triage?unknown_after_ms=0&dispatch_timeout_ms=0';
    expect(
      (await get(`${q}&kind=unknown_outcome`)).body.items.map((item: { operation_ref: string }) => item.operation_ref),
    ).toEqual([`${RUN}/invoice_1`]);
    expect((await get(`${q}&tool=refund`)).body.counts.total).toBe(1);
    expect((await get(`${q}&reason=INVOICE_ALREADY_PAID`)).body.items[0].operation_ref).toBe(`${RUN}/pay_1`);
    expect(
      (await get(`${q}&q=EMAIL_`)).body.items.map((item: { operation_ref: string }) => item.operation_ref),
    ).toEqual([`${RUN}/email_1`]);
    expect((await get(`${q}&run_id=run_none`)).body.counts.total).toBe(0);
    const first = await get(`${q}&limit=3`);
    expect(first.body.items).toHaveLength(3);
    const second = await get(`${q}&limit=3&cursor=${first.body.next_cursor}`);
    expect(second.body.items.map((item: { operation_ref: string }) => item.operation_ref)).toEqual([`${RUN}/pay_1`]);
    expect(second.body.next_cursor).toBeUndefined();
  });

  it('refuses what is not its shape with a typed problem naming the field', async () => {
    for (const [query, field] of [
      ['kind=lost', 'kind'],
      ['unknown_after_ms=-1', 'unknown_after_ms'],
      ['dispatch_timeout_ms=soon', 'dispatch_timeout_ms'],
      ['cursor=nope!', 'cursor'],
      ['limit=0', 'limit'],
    ]) {
      const answer = await get(`/v1/triage?${query}`);
      expect([answer.status, answer.contentType.split(';')[0], answer.body.code, answer.body.field]).toEqual([
        400,
        'application/problem+json',
        'BAD_REQUEST',
        field,
      ]);
    }
  });
});

describe('the lists and the long poll behind the console', () => {
  it('lists runs most recently changed first, by text and open steps', async () => {
    const runs = await get(`/v1/runs?q=${RUN.slice(4)}`);
    expect(runs.status).toBe(200);
    expect(runs.body.runs).toEqual([expect.objectContaining({ run_id: RUN, total: 5, open: 3 })]);
    expect((await get(`/v1/runs?q=${RUN.slice(4)}&open=true`)).body.runs).toHaveLength(1);
    expect((await get('/v1/runs?q=no_such_run')).body.runs).toEqual([]);
    expect((await get('/v1/runs?open=maybe')).body).toMatchObject({ code: 'BAD_REQUEST', field: 'open' });
  });

  it('finds operations by text on the ref, newest first, and by the trust figure that counts them', async () => {
    const listed = await get(`/v1/operations?q=${RUN}/EMAIL&order=newest`);
    expect(listed.body.items.map((item: { operation_ref: string }) => item.operation_ref)).toEqual([
      `${RUN}/email_2`,
      `${RUN}/email_1`,
    ]);
    const unknown = await get(`/v1/operations?has=unknown_outcomes&run_id=${RUN}`);
    expect(unknown.body.items.map((item: { operation_ref: string }) => item.operation_ref)).toEqual([
      `${RUN}/invoice_1`,
    ]);
    expect((await get('/v1/operations?has=everything')).body).toMatchObject({ code: 'BAD_REQUEST', field: 'has' });
  });

  it('answers the long poll when the log moves, and says so when it did not', async () => {
    const now = await get('/v1/changes');
    expect(now.body).toMatchObject({ changed: true, position: expect.any(Number) });
    const quiet = await get(`/v1/changes?after=${now.body.position}&wait_ms=300`);
    expect(quiet.body).toMatchObject({ changed: false, position: now.body.position });
    const waiting = get(`/v1/changes?after=${now.body.position}&wait_ms=20000`);
    await incidentsAt(ledger.baseUrl, RUNTIME_KEY).escalated(`${RUN}/pay_2`, RUN, 'pay_invoice');
    const moved = await waiting;
    expect(moved.body.changed).toBe(true);
    expect(moved.body.position).toBeGreaterThan(now.body.position);
    expect((await get('/v1/changes?wait_ms=30001')).body).toMatchObject({ code: 'BAD_REQUEST', field: 'wait_ms' });
  });
});
