/**
 * The CLI on the data directory of a service that is running: `verify --since` says what it proved
 * (the log only grew since the checkpoint), and `projections rebuild` refuses to run a second
 * projection engine beside the service's, until the service has stopped.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { runCli } from '../support/cli-harness';
import { fact, opPath, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';

let ledger: LedgerProcess;

async function plan(ref: string): Promise<void> {
  const answer = await request(ledger.baseUrl, 'POST', `${opPath(ref)}/events`, {
    events: [
      fact('StepPlanned', {
        run_id: ref.split('/')[0],
        tool: 'create_invoice',
        side_effect: 'write',
        input_hash: 'h1',
      }),
    ],
  });
  if (answer.status !== 200) throw new Error(`${ref}: ${answer.status} ${JSON.stringify(answer.body)}`);
}

beforeAll(async () => {
  ledger = await startLedger();
  for (let step = 1; step <= 3; step++) await plan(`run_cli_${step}/step_1`);
}, 60_000);

afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
});

describe('verify --since, with the service running', () => {
  it('says what it proved: the first events and every head of the checkpoint are unchanged, and how many were appended', async () => {
    const checkpoint = join(ledger.dataDir, '..', `checkpoint-${randomUUID()}.json`);
    try {
      expect(runCli(['verify', '--data-dir', ledger.dataDir, '--checkpoint-out', checkpoint]).status).toBe(0);
      await plan('run_cli_4/step_1');
      await plan('run_cli_5/step_1');

      const plain = runCli(['verify', '--data-dir', ledger.dataDir]);
      const since = runCli(['verify', '--data-dir', ledger.dataDir, '--since', checkpoint]);
      expect(since.status).toBe(0);
      // Everything the plain verify says (the chains, and the default head witness), then what --since proved.
      const plainLines = plain.stdout.trimEnd().split('\n');
      const sinceLines = since.stdout.trimEnd().split('\n');
      expect(sinceLines.slice(0, plainLines.length)).toEqual(plainLines);
      const [proved, ...rest] = sinceLines.slice(plainLines.length);
      const taken = JSON.parse(readFileSync(checkpoint, 'utf8')) as {
        taken_at: string;
        anchor: { events: number; position: number };
        heads: unknown[];
      };
      const json = JSON.parse(runCli(['verify', '--data-dir', ledger.dataDir, '--since', checkpoint, '--json']).stdout);
      expect(json.since).toEqual({
        checkpoint_taken_at: taken.taken_at,
        only_grew: true,
        events_then: taken.anchor.events,
        position_then: taken.anchor.position,
        events_now: expect.any(Number),
        heads_then: taken.heads.length,
      });
      // Two submits, each at least one event in the log (the three operations' heads were recorded).
      expect(taken.heads.length).toBe(3);
      expect(json.since.events_now - taken.anchor.events).toBeGreaterThanOrEqual(2);
      expect(proved).toBe(
        `since the checkpoint of ${taken.taken_at}: the log only grew. Its first ${taken.anchor.events} events (up to position ${taken.anchor.position}) ` +
          'are the ones the checkpoint recorded, in the same order (they hash to its log hash), and each of its 3 stream heads is still there ' +
          `at the same revision with the same hash; ${json.since.events_now - taken.anchor.events} events appended since`,
      );
      expect(rest).toEqual([]);
    } finally {
      rmSync(checkpoint, { force: true });
    }
  });

  it('is refused on an export file, which it would otherwise ignore', () => {
    const run = runCli(['verify', '--archive', join(ledger.dataDir, 'none.ndjson'), '--since', 'cp.json']);
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('not on --archive');
  });
});

describe('projections rebuild on the data directory of a running service', () => {
  it('refuses while the service holds the read model (exit 3), and rebuilds once it has stopped', async () => {
    const refused = runCli(['projections', 'rebuild', '--progress', 'never', '--data-dir', ledger.dataDir]);
    expect({ status: refused.status, stdout: refused.stdout }).toEqual({ status: 3, stdout: '' });
    expect(refused.stderr).toContain(
      'is open in another process (a running service?): stop it first, or rebuild through it: --url <its URL>, with an admin --key unless it runs in local mode (no keys)',
    );
    // The service noticed nothing: it still answers.
    expect((await request(ledger.baseUrl, 'GET', '/health/ready')).status).toBe(200);
    // The advice works as given: this service runs in local mode, so --url needs no key.
    const through = runCli(['projections', 'rebuild', '--url', ledger.baseUrl]);
    expect({ status: through.status, stderr: through.stderr }).toEqual({ status: 0, stderr: '' });
    expect(through.stdout).toContain(
      `rebuilt step_state, evidence_trail, run_summary, trust_metrics on ${ledger.baseUrl}`,
    );

    await ledger.stop();
    const rebuilt = runCli(['projections', 'rebuild', '--progress', 'never', '--data-dir', ledger.dataDir]);
    expect(rebuilt.stderr).toBe('');
    expect(rebuilt.status).toBe(0);
    expect(rebuilt.stdout).toMatch(/^rebuilt 4 projections from \d+ events/);
  });
});
