/**
 * A read model edited while the service was stopped (docs/reliability.md, "A corrupted read
 * model"): `verify --read-models` names what differs from the log, the recovery listing never
 * hides an operation in doubt (it answers from the store's index, committed with the events), and
 * the restarted service rebuilds the damaged read model instead of serving it.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { runCli } from '../support/cli-harness';
import { committedPosition, submitFact } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';

const REF = 'run_rm/step_1';
const DONE = 'run_rm/step_2';

async function submit(ledger: LedgerProcess, ref: string, type: string, data: Record<string, unknown>) {
  return { position: committedPosition(await submitFact(ledger.baseUrl, ref, type, data), type) as number };
}

async function get<T>(ledger: LedgerProcess, path: string): Promise<{ status: number; body: T }> {
  const response = await fetch(`${ledger.baseUrl}${path}`);
  return { status: response.status, body: (await response.json()) as T };
}

describe('a read model edited behind the service', () => {
  let ledger: LedgerProcess;

  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  it('is reported by verify, never hides an operation in doubt, and is rebuilt at start', async () => {
    ledger = await startLedger();
    const plan = { run_id: 'run_rm', tool: 'create_invoice', side_effect: 'write', input_hash: 'sha256:rm' };
    await submit(ledger, REF, 'StepPlanned', plan);
    await submit(ledger, REF, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:rm' });
    await submit(ledger, REF, 'EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.outcomeUnknown(REF) });
    await submit(ledger, DONE, 'StepPlanned', plan);
    await submit(ledger, DONE, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:rm' });
    const last = await submit(ledger, DONE, 'EnvelopeRecorded', {
      attempt: 1,
      envelope: seedEnvelopes.success(DONE, 'inv_9'),
    });
    const evidence = await get<{ status: string }>(
      ledger,
      `/v1/operations/${encodeURIComponent(REF)}/evidence?wait_for_position=${last.position}`,
    );
    expect(evidence.body.status).toBe('verifying');
    await ledger.stop();

    // The operator's bad day: the evidence says succeeded, the in-doubt step is gone from the state index.
    const db = new Database(join(ledger.dataDir, 'read-models.sqlite'));
    db.prepare("UPDATE rm_evidence_trail SET doc = json_set(doc, '$.status', 'succeeded') WHERE key LIKE ?").run(
      `%${REF}`,
    );
    db.prepare('DELETE FROM rm_step_state WHERE key LIKE ?').run(`%${REF}`);
    db.close();

    const verify = runCli(['verify', '--data-dir', ledger.dataDir, '--read-models', '--json']);
    expect(verify.status).toBe(1);
    const report = JSON.parse(verify.stdout) as {
      ok: boolean;
      read_models: { ok: boolean; differences: Array<{ projection: string; kind: string }> };
    };
    expect(report.ok).toBe(false);
    expect(report.read_models.differences).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ projection: 'evidence_trail', kind: 'differs' }),
        expect.objectContaining({ projection: 'step_state', kind: 'missing' }),
      ]),
    );

    ledger = await ledger.restart();
    // From the store's index: the operation in doubt is listed whatever the read model says.
    const recovery = await get<{ items: Array<{ operation_ref: string; status: string }> }>(ledger, '/v1/recovery');
    expect(recovery.body.items.map((item) => [item.operation_ref, item.status])).toEqual([[REF, 'verifying']]);

    // Once the check and rebuild are done, what is served is what the log gives.
    let served: { status: number; body: { status?: string } } | undefined;
    for (let polls = 0; polls < 200; polls++) {
      served = await get<{ status?: string }>(ledger, `/v1/operations/${encodeURIComponent(REF)}/evidence`);
      if (served.status === 200) break;
      expect(served.status).toBe(503);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(served?.body.status).toBe('verifying');
    const listed = await get<{ items: Array<{ operation_ref: string }> }>(ledger, '/v1/operations?status=verifying');
    expect(listed.body.items.map((item) => item.operation_ref)).toEqual([REF]);
    await ledger.stop();
    expect(runCli(['verify', '--data-dir', ledger.dataDir, '--read-models']).status).toBe(0);
  });
});
