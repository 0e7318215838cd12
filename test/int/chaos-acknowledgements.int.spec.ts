/**
 * An acknowledgement is a promise about the log: a result marked `appended` names an event that is
 * in the log, exactly once. The campaign found the one case where it was not: a plan repeated with
 * the same definition under a new event id (executeWrite plans on every call, with a fresh id) was
 * answered `appended` while nothing was stored. It must answer `duplicate`: the plan already stands.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { LedgerClient, executeWrite, type ToolCall, type WriteStep } from '@recovery-ledger/client';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

describe('a result marked appended is in the log', () => {
  let ledger: LedgerProcess;
  let client: LedgerClient;

  beforeAll(async () => {
    ledger = await startLedger();
    client = new LedgerClient({ baseUrl: ledger.baseUrl, maxRetries: 0 });
  });

  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  function storedIds(ref: string): Map<string, number> {
    const db = new Database(join(ledger.dataDir, 'events.sqlite'), { readonly: true, fileMustExist: true });
    try {
      const rows = db
        .prepare('SELECT event_id, COUNT(*) AS n FROM events WHERE stream = ? GROUP BY event_id')
        .all(`op-default:${ref}`) as Array<{
        event_id: string;
        n: number;
      }>;
      return new Map(rows.map((row) => [row.event_id, row.n]));
    } finally {
      db.close();
    }
  }

  test('the same plan under a new event id is answered duplicate, and nothing is stored for it', async () => {
    const ref = 'run_ack/step_plan';
    const definition = {
      run_id: 'run_ack',
      tool: 'create_invoice',
      side_effect: 'write' as const,
      input_hash: 'sha256:ack',
    };
    const first = await client.planStep(ref, definition, { eventId: client.newEventId() });
    const secondId = client.newEventId();
    const second = await client.planStep(ref, definition, { eventId: secondId });

    expect(first.results[0].status).toBe('appended');
    expect(second.results).toEqual([{ event_id: secondId, status: 'duplicate' }]);
    expect(second.revision).toBe(first.revision);
    expect(storedIds(ref).has(secondId)).toBe(false);
  });

  test('every result executeWrite was answered appended, over repeated calls, is stored exactly once', async () => {
    const answered: Array<{ event_id: string; status: string }> = [];
    const recording: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      const text = await response.clone().text();
      if (response.ok && init?.method === 'POST') answered.push(...(JSON.parse(text).results ?? []));
      return response;
    };
    const sdk = new LedgerClient({ baseUrl: ledger.baseUrl, maxRetries: 0, fetch: recording });
    const step: WriteStep<{ to: string }> = {
      operationRef: 'run_ack/step_write',
      runId: 'run_ack',
      tool: 'send_email',
      input: { to: 'a@example.com' },
    };
    const tool: ToolCall<{ to: string }> = async (_input, context) => ({
      ok: true,
      operation_ref: context.operationRef,
      commit_state: 'committed',
      result: { id: 'msg_1' },
      verification: { checked_at: new Date().toISOString(), evidence_ref: 'msg_1' },
    });

    expect((await executeWrite(sdk, step, tool)).status).toBe('succeeded');
    // Run again, as a restarted runtime would: the plan is repeated, the success replayed.
    expect((await executeWrite(sdk, step, tool)).kind).toBe('replayed');
    expect((await executeWrite(sdk, step, tool)).kind).toBe('replayed');

    const stored = storedIds(step.operationRef);
    const appended = answered.filter((result) => result.status === 'appended');
    expect(appended.length).toBeGreaterThan(0);
    for (const result of appended) expect([result.event_id, stored.get(result.event_id)]).toEqual([result.event_id, 1]);
  });
});
