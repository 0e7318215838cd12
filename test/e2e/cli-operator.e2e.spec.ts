/**
 * `recovery-ledger resolve|cancel|reopen|ack` against the built service as a real process
 * (docs/contract.md §4.10): an escalated step driven to a terminal state from the command line
 * with its evidence on record, and the same refusals as the HTTP API, printed with the problem's
 * code and exit 1.
 */
import { randomUUID } from 'node:crypto';
import { startCli, type CliRun } from '../support/cli-harness';
import { fact, ledgerAt } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { until } from '../support/until';

const RUNTIME_KEY = 'cli-operator-runtime-key-01';
const OPERATOR_KEY = 'cli-operator-operator-key-1';
const AUDITOR_KEY = 'cli-operator-auditor-key-01';

let ledger: LedgerProcess;
beforeAll(async () => {
  ledger = await startLedger({
    env: { LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${OPERATOR_KEY}:operator:acme,${AUDITOR_KEY}:auditor:acme` },
  });
}, 60_000);
afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
});

/**
 * Runs the CLI without blocking this process: a synchronous spawn would stall the test's own HTTP
 * client for seconds, and the service would close its idle keep-alive sockets under it.
 */
async function run(args: string[], env: Record<string, string>): Promise<CliRun> {
  const child = startCli(args, env);
  const status = await child.exited;
  return { status, stdout: child.stdout(), stderr: child.stderr() };
}
const cli = (args: string[], key = OPERATOR_KEY) => run(args, { LEDGER_URL: ledger.baseUrl, LEDGER_API_KEY: key });

/** A step whose write timed out and whose lookup was unavailable: escalated, outcome unknown. */
async function escalatedUnknown(): Promise<string> {
  const ref = `run_cli/${randomUUID().slice(0, 8)}`;
  const runtime = ledgerAt(ledger.baseUrl, { authorization: `Bearer ${RUNTIME_KEY}` });
  const plan = {
    run_id: 'run_cli',
    tool: 'refund_payment',
    side_effect: 'write',
    input_hash: 'sha256:in-1',
    policy: { consistency_window_ms: 0 },
  };
  for (const event of [
    fact('StepPlanned', plan),
    fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:in-1' }),
    fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.outcomeUnknown(ref) }),
    fact('VerificationRecorded', { outcome: 'lookup_unavailable', checked_at: new Date().toISOString() }),
  ]) {
    expect((await runtime.submit(ref, [event])).status).toBe(200);
  }
  return ref;
}

describe('recovery-ledger operator commands', () => {
  it('ack, then resolve --found: the escalated step succeeds with the evidence and the operator on record', async () => {
    const ref = await escalatedUnknown();
    const acked = await cli(['ack', ref, '--assignee', 'ana', '--note', 'looking at it']);
    expect(acked).toMatchObject({ status: 0, stderr: '' });
    expect(acked.stdout).toBe(
      `${ref}: EscalationAcknowledged recorded; status escalated (LOOKUP_UNAVAILABLE), next none, revision 8\n`,
    );
    const resolved = await cli([
      'resolve',
      ref,
      '--found',
      'inv_9',
      '--note',
      'checked the provider: invoice inv_9 exists',
    ]);
    expect(resolved).toMatchObject({ status: 0, stderr: '' });
    expect(resolved.stdout).toContain(
      `${ref}: OutcomeVerifiedManually recorded; status succeeded (MANUALLY_VERIFIED_COMMITTED), next none`,
    );
    // The trail is a read model: it may lag the append by a moment.
    const evidence = await until(
      () => run(['evidence', ref], { LEDGER_URL: ledger.baseUrl, LEDGER_API_KEY: AUDITOR_KEY }),
      (run) => run.stdout.includes('succeeded'),
      'the evidence trail to show the resolution',
    );
    expect(evidence.stdout).toContain('verdict:   committed — verified by a person (key_');
    expect(evidence.stdout).toContain('evidence:  inv_9');
  });

  it('refuses what the state does not allow with the same code as the API, exit 1, nothing recorded', async () => {
    const ref = await escalatedUnknown();
    const reopen = await cli(['reopen', ref, '--attempts', '2', '--reason', 'provider fixed']);
    expect(reopen.status).toBe(1);
    expect(reopen.stderr).toMatch(/^recovery-ledger: 409 OUTCOME_UNVERIFIED: /);
    const cancel = await cli(['cancel', ref, '--reason', 'no longer wanted']);
    expect(cancel.status).toBe(1);
    expect(cancel.stderr).toMatch(/^recovery-ledger: 409 OUTCOME_UNVERIFIED: /);
    // resolve --not-found, then reopen with a budget, then the next dispatch is granted; then cancel.
    expect((await cli(['resolve', ref, '--not-found', '--note', 'nothing at the provider'])).stdout).toContain(
      'status retry_ready (MANUALLY_VERIFIED_NOT_FOUND)',
    );
    const notEscalated = await cli(['reopen', ref, '--attempts', '1', '--reason', 'again']);
    expect({ status: notEscalated.status, stderr: notEscalated.stderr.split(':').slice(0, 2).join(':') }).toEqual({
      status: 1,
      stderr: 'recovery-ledger: 409 STEP_NOT_ESCALATED',
    });
    expect((await cli(['cancel', ref, '--reason', 'the customer withdrew'])).stdout).toContain(
      'status cancelled (STEP_CANCELLED), next none',
    );
    const again = await cli(['ack', ref, '--assignee', 'ana']);
    expect({ status: again.status, code: /409 (\w+)/.exec(again.stderr)?.[1] }).toEqual({
      status: 1,
      code: 'STEP_CANCELLED',
    });
  });

  it('a key that is not an operator key is refused 403; no --url is a usage error; a wrong flag set too', async () => {
    const ref = await escalatedUnknown();
    const runtime = await cli(['ack', ref, '--assignee', 'ana'], RUNTIME_KEY);
    expect({ status: runtime.status, code: /^recovery-ledger: (\d+ \w+)/.exec(runtime.stderr)?.[1] }).toEqual({
      status: 1,
      code: '403 FORBIDDEN',
    });
    const local = await run(['cancel', ref, '--reason', 'x'], {});
    expect(local.status).toBe(2);
    expect(local.stderr).toContain('give --url');
    const both = await cli(['resolve', ref, '--found', 'inv_1', '--not-found', '--note', 'x']);
    expect(both.status).toBe(2);
    expect(both.stderr).toContain('exactly one of --found <evidence_ref> and --not-found');
  });
});
