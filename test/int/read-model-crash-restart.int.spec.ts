/**
 * The service restarted after a crash (its read model not sealed) trusts the read model by each
 * projection's checkpoint and digest instead of rebuilding it to compare (docs/reliability.md,
 * "A corrupted read model"): it reads at most one event of the log per projection and rebuilds
 * nothing; a row edited behind it is found and that projection alone rebuilt, and what is served
 * afterwards is what the log gives. Counted by what was read and rebuilt, never by time.
 */
import Database from 'better-sqlite3';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { committedPosition, opPath, request, submitFact } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';
import { until } from '../support/until';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';

/** The read model's file and its seal (src/store/read-model.port.ts, src/projection-engine/read-model-seal.ts). */
const READ_MODEL_FILE = 'read-models.sqlite';
const SEAL_FILE = `${READ_MODEL_FILE}.seal.json`;
const ANCHOR_KEY = 'read-model-crash-restart-key-0123456789';

interface ReadModelCheck {
  state: string;
  by?: string;
  events_read?: number;
  rows_read?: number;
  projections_rebuilt?: string[];
}

async function readModelCheck(ledger: LedgerProcess): Promise<ReadModelCheck> {
  const { ProjectionsLifecycle } = await import('../../src/projection-engine/projections.module');
  return ledger.app.get(ProjectionsLifecycle, { strict: false }).readModelCheck as ReadModelCheck;
}

const settled = (ledger: LedgerProcess) =>
  until(
    () => readModelCheck(ledger),
    (check) => check.state === 'verified' || check.state === 'rebuilt' || check.state === 'failed',
    'the read-model check to settle',
  );

describe('a restart after a crash', () => {
  const plan = { run_id: 'run_crash', tool: 'create_invoice', side_effect: 'write', input_hash: 'sha256:c' };
  let ledger: LedgerProcess | undefined;
  let dataDir: string;
  let events = 0;

  beforeAll(async () => {
    ledger = await startLedger({ env: { LEDGER_ANCHOR_KEY: ANCHOR_KEY } });
    dataDir = ledger.dataDir;
    let last = 0;
    for (let n = 0; n < 30; n++) {
      const ref = `run_crash/step_${n}`;
      committedPosition(await submitFact(ledger.baseUrl, ref, 'StepPlanned', plan), 'plan');
      committedPosition(
        await submitFact(ledger.baseUrl, ref, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:c' }),
        'dispatch',
      );
      const envelope = n === 0 ? seedEnvelopes.outcomeUnknown(ref) : seedEnvelopes.success(ref, `inv_${n}`);
      last = committedPosition(
        await submitFact(ledger.baseUrl, ref, 'EnvelopeRecorded', { attempt: 1, envelope }),
        'envelope',
      ) as number;
    }
    events = last;
    const read = await request(
      ledger.baseUrl,
      'GET',
      `${opPath('run_crash/step_0')}/evidence?wait_for_position=${last}`,
    );
    expect(read.status).toBe(200);
    await ledger.stop();
    ledger = undefined;
  });

  afterEach(async () => {
    await ledger?.stop();
    ledger = undefined;
  });

  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('refuses reads of a projection only while it is compared or rebuilt because it differs', async () => {
    const { servable } = await import('../../src/projection-engine/projections.module');
    // Comparing: nothing is known to agree yet.
    expect(servable({ state: 'verifying' }, 'step_state')).toBe(false);
    // One found to differ is rebuilt beside; the others are served meanwhile.
    const rebuilding = { state: 'verifying' as const, projections_rebuilt: ['evidence_trail'] };
    expect(servable(rebuilding, 'evidence_trail')).toBe(false);
    expect(servable(rebuilding, 'step_state')).toBe(true);
    expect(servable({ state: 'rebuilt', projections_rebuilt: ['evidence_trail'] }, 'evidence_trail')).toBe(true);
    expect(servable({ state: 'failed' }, 'step_state')).toBe(false);
  });

  /** Each projection's rows with the stamp of their last write (a write stamps a document anew). */
  function stamps(): Record<string, Array<[string, number | null]>> {
    const db = new Database(join(dataDir, READ_MODEL_FILE), { readonly: true });
    try {
      return Object.fromEntries(
        ['rm_evidence_trail', 'rm_step_state', 'rm_run_summary', 'rm_trust_metrics'].map((table) => [
          table,
          db.prepare(`SELECT key, stamp FROM ${table} ORDER BY key`).raw().all() as Array<[string, number | null]>,
        ]),
      );
    } finally {
      db.close();
    }
  }

  /** A crash leaves the read model as its last commit left it, with no seal. */
  const crashed = () => rmSync(join(dataDir, SEAL_FILE), { force: true });

  it('serves the read model it finds without rebuilding it, having read one event per projection at most', async () => {
    crashed();
    const before = stamps();
    ledger = await startLedger({ dataDir, env: { LEDGER_ANCHOR_KEY: ANCHOR_KEY } });
    const check = await settled(ledger);
    // A rebuild to compare reads every event of the log (here one per fact and a few derived).
    expect(events).toBeGreaterThan(90);
    expect(check.events_read ?? events).toBeLessThanOrEqual(4);
    expect(check).toMatchObject({ state: 'verified', by: 'digest' });
    expect(check.projections_rebuilt).toBeUndefined();
    expect(check.rows_read).toBeGreaterThan(0);
    // No row was written again: each write stamps a document anew.
    expect(stamps()).toEqual(before);
    const listed = await request(ledger.baseUrl, 'GET', '/v1/operations?status=verifying');
    expect(listed.status).toBe(200);
    expect(listed.body.items.map((item: { operation_ref: string }) => item.operation_ref)).toEqual([
      'run_crash/step_0',
    ]);
  });

  it('finds a row edited behind it, rebuilds that projection alone, and serves what the log gives', async () => {
    crashed();
    const db = new Database(join(dataDir, READ_MODEL_FILE));
    db.prepare("UPDATE rm_evidence_trail SET doc = json_set(doc, '$.status', 'succeeded') WHERE key LIKE ?").run(
      '%run_crash/step_0',
    );
    db.close();
    const before = stamps();
    ledger = await startLedger({ dataDir, env: { LEDGER_ANCHOR_KEY: ANCHOR_KEY } });
    const check = await settled(ledger);
    expect(check).toMatchObject({ state: 'rebuilt', by: 'digest', projections_rebuilt: ['evidence_trail'] });
    // The other projections were left as they stood.
    const after = stamps();
    for (const table of ['rm_step_state', 'rm_run_summary', 'rm_trust_metrics'])
      expect(after[table]).toEqual(before[table]);
    expect(after.rm_evidence_trail).not.toEqual(before.rm_evidence_trail);
    const evidence = await request(ledger.baseUrl, 'GET', `${opPath('run_crash/step_0')}/evidence`);
    expect(evidence.status).toBe(200);
    expect(evidence.body.status).toBe('verifying');
  });
});
