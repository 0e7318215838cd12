/**
 * `recovery-ledger replay` and `evidence` on a data directory: the built binary, run as a user runs
 * it, on a store seeded through the ledger's own command path with a stepping clock, so the
 * timeline it prints is known to the millisecond.
 */
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/ledger-config';
import { LedgerService } from '../../src/ledger/ledger.service';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { CLI, openSeeder, runCli, seedIncident, steppingClock, tempDataDir } from '../support/cli-harness';

const REF = 'run_81/step_4';
let dataDir: string;

beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build first (npx tsc -p tsconfig.build.json)`);
  dataDir = tempDataDir('replay');
  const seeder = await openSeeder(dataDir);
  await seedIncident(seeder);
  await seeder.close();
});

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const replay = (...args: string[]) => runCli(['replay', REF, '--data-dir', dataDir, ...args]);

describe('recovery-ledger replay', () => {
  it('prints every event with the state after it and why, then the time spent in each state', () => {
    const run = replay();
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const lines = run.stdout.split('\n');
    expect(lines[0]).toBe('run_81/step_4: 10 events, state succeeded');
    // One row per revision: the event, the state the fold reached, and the reason.
    const row = (revision: number) => lines.find((line) => line.startsWith(`${revision} `)) ?? '';
    expect(row(0)).toMatch(
      /^0\s+2025-03-01T09:00:00\.000Z\s+StepPlanned\s+planned\s+0 used, 3 left\s+planned write create_invoice in run run_81/,
    );
    expect(row(4)).toMatch(
      /EnvelopeRecorded\s+dispatched\s+.*OUTCOME_UNKNOWN \(dependency, unknown\), tool says verify_operation/,
    );
    expect(row(5)).toMatch(
      /TransitionRecorded\s+verifying\s+.*dispatched -> verifying because OUTCOME_UNKNOWN; next verify_operation/,
    );
    expect(row(6)).toMatch(/2025-03-01T09:00:04\.500Z\s+DispatchRefused\s+verifying\s+.*refused: VERIFY_BEFORE_RETRY$/);
    expect(row(7)).toMatch(/VerificationRecorded\s+verifying\s+.*found_committed, evidence inv_123$/);
    expect(row(8)).toMatch(
      /TransitionRecorded\s+succeeded\s+1 used, 0 left\s+verifying -> succeeded because VERIFIED_COMMITTED; next none$/,
    );
    expect(row(9)).toMatch(/DispatchRefused\s+succeeded\s+.*duplicate write prevented$/);
    const times = run.stdout.slice(run.stdout.indexOf('Time in each state'));
    expect(times).toMatch(/planned\s+2025-03-01T09:00:00\.000Z\s+1\.5 s/);
    expect(times).toMatch(/dispatched\s+2025-03-01T09:00:01\.500Z\s+1\.5 s/);
    expect(times).toMatch(/verifying\s+2025-03-01T09:00:03\.000Z\s+3\.0 s/);
    expect(times).toMatch(/succeeded\s+2025-03-01T09:00:06\.000Z\s+\(terminal\)/);
  });

  it('--json gives each state as the ledger folds it, ending where the ledger stands', async () => {
    const run = replay('--json');
    expect(run.status).toBe(0);
    const timeline = JSON.parse(run.stdout);
    expect(timeline.rows.map((row: { state: { status: string } }) => row.state.status)).toEqual([
      'planned',
      'planned',
      'planned',
      'dispatched',
      'dispatched',
      'verifying',
      'verifying',
      'verifying',
      'succeeded',
      'succeeded',
    ]);
    // The last state is the one the command path itself reads back (same fold, same view).
    const store = SqliteEventStore.open({ file: join(dataDir, 'events.sqlite') });
    try {
      const config = loadConfig({ LEDGER_DATA_DIR: dataDir });
      const ledger = new LedgerService(store, steppingClock(), { ...config, maxConflictRetries: 0 });
      const { view } = await ledger.getState('default', REF);
      expect(timeline.rows[timeline.rows.length - 1].state).toEqual(view);
    } finally {
      await store.close();
    }
    expect(timeline.time_in_state.map((span: { status: string; ms?: number }) => [span.status, span.ms])).toEqual([
      ['planned', 1500],
      ['dispatched', 1500],
      ['verifying', 3000],
      ['succeeded', undefined],
    ]);
  });

  it('--as-of stops at a revision: the state as it stood then', () => {
    const run = replay('--as-of', '5');
    expect(run.status).toBe(0);
    expect(run.stdout.split('\n')[0]).toBe('run_81/step_4: 6 events as of revision 5 of 9, state verifying');
    expect(run.stdout).not.toMatch(/^6 /m);
    expect(run.stdout).toMatch(/verifying\s+2025-03-01T09:00:03\.000Z\s+\(current\)/);
    const json = JSON.parse(replay('--as-of', '5', '--json').stdout);
    expect(json.as_of_revision).toBe(5);
    expect(json.rows).toHaveLength(6);
  });

  it('an operation with no events is a failure (exit 1) that says so', () => {
    const run = runCli(['replay', 'run_0/none', '--data-dir', dataDir]);
    expect(run.status).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe('recovery-ledger: operation run_0/none has no events in tenant default\n');
    // Another tenant's operation is not there either.
    expect(runCli(['replay', REF, '--data-dir', dataDir, '--tenant', 'acme']).status).toBe(1);
  });

  it('a data directory without a store is refused, and nothing is created there', () => {
    const empty = tempDataDir('empty');
    try {
      const run = runCli(['replay', REF, '--data-dir', empty]);
      expect(run.status).toBe(1);
      expect(run.stderr).toMatch(/no event store at .*events\.sqlite/);
      expect(existsSync(join(empty, 'events.sqlite'))).toBe(false);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it('takes the data directory from LEDGER_DATA_DIR when no --data-dir is given', () => {
    const run = runCli(['replay', REF], { LEDGER_DATA_DIR: dataDir });
    expect(run.status).toBe(0);
    expect(run.stdout.split('\n')[0]).toBe('run_81/step_4: 10 events, state succeeded');
  });
});

describe('recovery-ledger evidence', () => {
  it('prints the verdict, how it was proven, and the trail', () => {
    const run = runCli(['evidence', REF, '--data-dir', dataDir]);
    expect(run.status).toBe(0);
    expect(run.stdout).toContain(
      'verdict:   committed — verified via get_invoice_by_operation_ref, evidence inv_123; 1 duplicate write prevented',
    );
    expect(run.stdout).toMatch(/commit:\s+committed, proven by verification \(event [0-9a-f-]{36}\)/);
    expect(run.stdout).toMatch(
      /^6\s+2025-03-01T09:00:04\.500Z\s+refusal\s+runtime-1\s+dispatch of attempt 2 refused: VERIFY_BEFORE_RETRY$/m,
    );
    const json = JSON.parse(runCli(['evidence', REF, '--data-dir', dataDir, '--json']).stdout);
    expect(json.verdict).toMatchObject({
      status: 'succeeded',
      commit_state: 'committed',
      proven_by: 'verification',
      evidence_ref: 'inv_123',
      duplicates_prevented: 1,
    });
    // The proof is the verification event of the trail.
    const proof = json.entries.find((entry: { event_id: string }) => entry.event_id === json.verdict.proof_event_id);
    expect(proof).toMatchObject({ kind: 'verification', revision: 7 });
  });
});

describe('the command line', () => {
  it('--help lists the commands and the exit codes, and exits 0', () => {
    const run = runCli(['--help']);
    expect(run.status).toBe(0);
    for (const command of ['replay', 'evidence', 'tail', 'projections', 'export', 'import', 'verify'])
      expect(run.stdout).toContain(`  ${command}`);
    expect(run.stdout).toContain('Exit codes:');
    expect(runCli(['replay', '--help']).stdout).toContain('--as-of <revision>');
  });

  it('usage errors exit 2 with a hint, like git and kubectl', () => {
    for (const args of [['bogus'], ['replay'], ['replay', REF, '--as-of', 'yesterday'], ['replay', REF, '--nope']]) {
      const run = runCli([...args, '--data-dir', dataDir]);
      expect({ args, status: run.status }).toEqual({ args, status: 2 });
      expect(run.stderr).toContain('(run with --help for usage)');
    }
  });

  it('commands the HTTP API has no route for refuse --url with a usage error', () => {
    for (const command of [['tail'], ['import', 'file.ndjson']]) {
      const run = runCli([...command, '--url', 'http://127.0.0.1:9']);
      expect(run.status).toBe(2);
      expect(run.stderr).toContain('works on a data directory only');
    }
  });
});
