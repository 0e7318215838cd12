import { randomUUID } from 'node:crypto';
import { fact, ledgerAt, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

describe('GET /v1/operations (step state index)', () => {
  let ledger: LedgerProcess;
  beforeAll(async () => {
    ledger = await startLedger();
  });
  afterAll(async () => {
    await ledger.stop();
    ledger.cleanup();
  });

  it('lists operations by state, tool and run, and pages with a cursor', async () => {
    const client = ledgerAt(ledger.baseUrl);
    const run = `run_${randomUUID().slice(0, 8)}`;
    let position = 0;
    for (let i = 0; i < 5; i++) {
      const ref = `${run}/step_${i}`;
      const tool = i % 2 ? 'send_email' : 'create_invoice';
      const planned = await client.submit(ref, [
        fact('StepPlanned', { run_id: run, tool, side_effect: 'write', input_hash: `h${i}` }),
      ]);
      position = planned.body.position;
      if (i < 2)
        position = (await client.submit(ref, [fact('AttemptDispatched', { attempt: 1, input_hash: `h${i}` })])).body
          .position;
    }
    const q = (query: string) =>
      request(ledger.baseUrl, 'GET', `/v1/operations?run_id=${run}&wait_for_position=${position}${query}`);
    const all = await q('');
    expect(all.status).toBe(200);
    expect(all.body.items).toHaveLength(5);
    expect(
      (await q('&status=dispatched')).body.items.map((i: { operation_ref: string }) => i.operation_ref).sort(),
    ).toEqual([`${run}/step_0`, `${run}/step_1`]);
    expect((await q('&tool=send_email')).body.items).toHaveLength(2);
    const first = await q('&limit=3');
    expect(first.body.items).toHaveLength(3);
    const second = await q(`&limit=3&cursor=${encodeURIComponent(first.body.next_cursor)}`);
    expect(second.body.items).toHaveLength(2);
    expect(second.body.next_cursor).toBeUndefined();
    const bad = await q('&status=flying');
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: 'BAD_REQUEST', field: 'status' });
  });
});
