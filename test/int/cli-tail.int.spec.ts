/**
 * `recovery-ledger tail` follows the global log while another process appends to the same store,
 * as it does beside a running service, and stops cleanly on Ctrl-C.
 */
import { rmSync } from 'node:fs';
import { openSeeder, runCli, seedIncident, startCli, tempDataDir, waitFor } from '../support/cli-harness';

let dataDir: string;

beforeAll(async () => {
  dataDir = tempDataDir('tail');
  const seeder = await openSeeder(dataDir);
  await seedIncident(seeder);
  await seeder.close();
});

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const lineCount = (text: string) => text.split('\n').filter((line) => line.length > 0).length;

describe('recovery-ledger tail', () => {
  it('--no-follow prints the log from a position and exits', () => {
    const run = runCli(['tail', '--from', '20', '--no-follow', '--data-dir', dataDir]);
    expect(run.status).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(
      /^21\s+2025-03-01T\S+\s+default run_82\/step_1\s+r\d+\s+EnvelopeRecorded\s+attempt 1 failed: INVALID_RECIPIENT_ADDRESS/,
    );
    expect(lines[2]).toMatch(/^23\s.*DispatchRefused\s+dispatch of attempt 2 refused: UNCHANGED_RETRY$/);
    // --json writes the export's event lines.
    const json = runCli(['tail', '--from', '22', '--no-follow', '--json', '--data-dir', dataDir]);
    expect(JSON.parse(json.stdout.trim())).toMatchObject({ kind: 'event', position: 23, type: 'DispatchRefused' });
  });

  it('follows events another process appends, and ends with exit 0 on SIGINT', async () => {
    const tail = startCli(['tail', '--data-dir', dataDir]);
    // It starts at the head: nothing of the existing log is printed.
    await waitFor(() => tail.stderr().includes('following the log after position 23'), 'tail to start');
    expect(tail.stdout()).toBe('');

    const writer = await openSeeder(dataDir, { start: '2025-03-02T10:00:00.000Z' });
    await writer.submit('run_83/step_1', 'StepPlanned', {
      run_id: 'run_83',
      tool: 'refund_payment',
      side_effect: 'write',
      input_hash: 'sha256:dd01',
    });
    await writer.close();

    // The plan and the transition it caused.
    await waitFor(() => lineCount(tail.stdout()) === 2, 'the appended events to be printed');
    const [plan, transition] = tail.stdout().trimEnd().split('\n');
    expect(plan).toMatch(
      /^24\s+2025-03-02T10:00:00\.000Z\s+default run_83\/step_1\s+r0\s+StepPlanned\s+planned write refund_payment in run run_83/,
    );
    expect(transition).toMatch(/^25\s.*TransitionRecorded\s+unplanned -> planned because STEP_PLANNED; next dispatch$/);

    tail.child.kill('SIGINT');
    expect(await tail.exited).toBe(0);
  });
});
