/**
 * `recovery-ledger projections rebuild` gives, from zero, byte for byte the read model the built
 * service produced live while the events were being submitted to it over HTTP.
 */
import { LEDGER_PROJECTIONS } from '@recovery-ledger/core/projections/projection-catalog';
import { readModelFile, SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { committed, invalidInput, runCli, unknownOutcome } from '../support/cli-harness';
import { committedPosition, request, submitFact } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';

let ledger: LedgerProcess;
let lastPosition = 0;

async function submit(ref: string, type: string, data: Record<string, unknown>): Promise<void> {
  const answer = await submitFact(ledger.baseUrl, ref, type, data);
  // Refusals are part of the story (they are recorded); anything but a 200 or a 409 is not.
  const position = committedPosition(answer, `${type} on ${ref}`, { refusals: 'allowed' });
  if (position !== undefined) lastPosition = Math.max(lastPosition, position);
}

/** Every projection's documents, links and checkpoint, as stored. */
function dumpReadModel(dataDir: string) {
  const readModel = SqliteReadModel.open({ file: readModelFile(dataDir) });
  try {
    for (const projection of LEDGER_PROJECTIONS) readModel.register(projection);
    return LEDGER_PROJECTIONS.map((projection) => ({
      name: projection.name,
      checkpoint: readModel.checkpoint(projection.name).position,
      ...readModel.dump(projection.name),
    }));
  } finally {
    readModel.close();
  }
}

beforeAll(async () => {
  ledger = await startLedger();
  for (let run = 1; run <= 4; run++) {
    const incident = `run_${run}/step_1`;
    await submit(incident, 'StepPlanned', {
      run_id: `run_${run}`,
      tool: 'create_invoice',
      side_effect: 'write',
      input_hash: 'h1',
      policy: { verification_tool: 'get_invoice_by_operation_ref' },
    });
    await submit(incident, 'AttemptDispatched', { attempt: 1, input_hash: 'h1' });
    await submit(incident, 'EnvelopeRecorded', { attempt: 1, envelope: unknownOutcome(incident) });
    await submit(incident, 'AttemptDispatched', { attempt: 2, input_hash: 'h1' });
    await submit(incident, 'VerificationRecorded', {
      outcome: 'found_committed',
      checked_at: new Date().toISOString(),
      evidence_ref: `inv_${run}`,
    });
    await submit(incident, 'AttemptDispatched', { attempt: 2, input_hash: 'h1' });
    const ok = `run_${run}/step_2`;
    await submit(ok, 'StepPlanned', {
      run_id: `run_${run}`,
      tool: 'send_email',
      side_effect: 'write',
      input_hash: 'h2',
    });
    await submit(ok, 'AttemptDispatched', { attempt: 1, input_hash: 'h2' });
    await submit(ok, 'EnvelopeRecorded', { attempt: 1, envelope: committed(ok, `msg_${run}`) });
    const fix = `run_${run}/step_3`;
    await submit(fix, 'StepPlanned', {
      run_id: `run_${run}`,
      tool: 'send_email',
      side_effect: 'write',
      input_hash: 'h3',
    });
    await submit(fix, 'AttemptDispatched', { attempt: 1, input_hash: 'h3' });
    await submit(fix, 'EnvelopeRecorded', { attempt: 1, envelope: invalidInput(fix) });
    await submit(fix, 'AttemptDispatched', { attempt: 2, input_hash: 'h3' });
  }
  // Read-your-writes on every projection, so the live read model covers the whole log.
  const wait = `wait_for_position=${lastPosition}&wait_timeout_ms=20000`;
  for (const path of [
    `/v1/operations/run_4%2Fstep_3/evidence?${wait}`,
    `/v1/runs/run_4?${wait}`,
    `/v1/recovery?${wait}`,
    `/v1/metrics/trust?${wait}`,
  ]) {
    const answer = await request(ledger.baseUrl, 'GET', path);
    if (answer.status !== 200) throw new Error(`${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
  }
  await ledger.stop();
});

afterAll(() => ledger?.cleanup());

describe('recovery-ledger projections rebuild', () => {
  it('rebuilds every projection from zero to exactly what the service built live', () => {
    const live = dumpReadModel(ledger.dataDir);
    expect(live.every((projection) => projection.checkpoint > 0 && projection.docs.length > 0)).toBe(true);

    const run = runCli(['projections', 'rebuild', '--progress', 'always', '--data-dir', ledger.dataDir]);
    expect(run.status).toBe(0);
    // The bar: count, rate and ETA.
    expect(run.stderr).toMatch(
      /rebuilding step_state, evidence_trail, run_summary, trust_metrics \[=+\] 100% \| \d+ events \| \d+ events\/s \| ETA \d+s/,
    );
    const [summary, header, ...rows] = run.stdout.trimEnd().split('\n');
    expect(summary).toMatch(/^rebuilt 4 projections from \d+ events in \S+ (ms|s) \(\d+ events\/s\)$/);
    expect(header).toMatch(/^PROJECTION\s+VERSION\s+DOCUMENTS\s+CHECKPOINT$/);
    for (const projection of live) {
      expect(rows).toContainEqual(
        expect.stringMatching(
          new RegExp(`^${projection.name}\\s+\\d+\\s+${projection.docs.length}\\s+${projection.checkpoint}$`),
        ),
      );
    }
    expect(dumpReadModel(ledger.dataDir)).toEqual(live);
  });

  it('rebuilds one projection by name (kebab-case or snake_case) and leaves it equal too', () => {
    const live = dumpReadModel(ledger.dataDir);
    const run = runCli([
      'projections',
      'rebuild',
      'evidence-trail',
      '--progress',
      'never',
      '--data-dir',
      ledger.dataDir,
    ]);
    expect(run.status).toBe(0);
    expect(run.stderr).toBe('');
    expect(run.stdout).toMatch(/^rebuilt 1 projection from \d+ events/);
    expect(run.stdout).toMatch(/^evidence_trail\s/m);
    expect(run.stdout).not.toMatch(/^step_state\s/m);
    expect(dumpReadModel(ledger.dataDir)).toEqual(live);
  });

  it('the local evidence command folds the same trail the projection stored', () => {
    const json = JSON.parse(runCli(['evidence', 'run_2/step_1', '--json', '--data-dir', ledger.dataDir]).stdout);
    const trail = dumpReadModel(ledger.dataDir)
      .find((projection) => projection.name === 'evidence_trail')
      ?.docs.find((doc) => doc.key === 'default:run_2/step_1');
    const stored = JSON.parse(trail?.doc ?? '{}');
    expect(json.verdict).toEqual(stored.verdict);
    expect(json.entries).toEqual(stored.entries);
  });

  it('an unknown projection is a usage error that lists the real ones', () => {
    const run = runCli(['projections', 'rebuild', 'nope', '--data-dir', ledger.dataDir]);
    expect(run.status).toBe(2);
    expect(run.stderr).toContain(
      'no projection "nope"; the projections are step_state, evidence_trail, run_summary, trust_metrics',
    );
  });
});
