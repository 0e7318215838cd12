/**
 * The on-call engineer's commands (docs/operations.md, docs/contract.md §4.10) against the service
 * in this process: the triage queue, several refs in one run with one result line each, the second
 * acknowledgement that names someone else, and a help text that says which options are required.
 */
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCli, startCli, type CliRun } from '../support/cli-harness';
import { fact, ledgerAt } from '../support/http';
import { startLedgerInProcess, type InProcessLedger } from '../support/ledger-in-process';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { until } from '../support/until';

const RUNTIME_KEY = 'cli-on-call-runtime-key-01';
const OPERATOR_KEY = 'cli-on-call-operator-key-1';
const ADMIN_KEY = 'cli-on-call-admin-key-0001';

let ledger: InProcessLedger;
beforeAll(async () => {
  ledger = await startLedgerInProcess({
    env: { LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${OPERATOR_KEY}:operator:acme,${ADMIN_KEY}:admin:acme` },
  });
}, 60_000);
afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
});

/** The service runs in this process: the CLI must not block it with a synchronous spawn. */
async function cli(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  const child = startCli(args, { LEDGER_URL: ledger.baseUrl, LEDGER_API_KEY: OPERATOR_KEY, ...env });
  const status = await child.exited;
  return { status, stdout: child.stdout(), stderr: child.stderr() };
}

const runtime = () => ledgerAt(ledger.baseUrl, { authorization: `Bearer ${RUNTIME_KEY}` });

async function planned(): Promise<string> {
  const ref = `run_oncall/${randomUUID().slice(0, 8)}`;
  const plan = { run_id: 'run_oncall', tool: 'refund_payment', side_effect: 'write', input_hash: 'sha256:in-1' };
  expect((await runtime().submit(ref, [fact('StepPlanned', plan)])).status).toBe(200);
  return ref;
}

/** A write that timed out and whose lookup was unavailable: escalated, outcome unknown. */
async function escalatedUnknown(): Promise<string> {
  const ref = await planned();
  for (const event of [
    fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:in-1' }),
    fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.outcomeUnknown(ref) }),
    fact('VerificationRecorded', { outcome: 'lookup_unavailable', checked_at: new Date().toISOString() }),
  ])
    expect((await runtime().submit(ref, [event])).status).toBe(200);
  return ref;
}

/** POST requests answered so far, by route pattern, from the service's own request metrics. */
async function postsByRoute(): Promise<Record<string, number>> {
  const text = await (
    await fetch(`${ledger.baseUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })
  ).text();
  const counts: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const match = /^ledger_http_request_duration_seconds_count\{(.*)\} (\d+)$/.exec(line);
    if (!match || !match[1].includes('method="POST"')) continue;
    const route = /route="([^"]*)"/.exec(match[1])?.[1] ?? '';
    counts[route] = (counts[route] ?? 0) + Number(match[2]);
  }
  return counts;
}

describe('the operator commands, as an on-call engineer first meets them', () => {
  it('--help marks the options each action requires', () => {
    for (const [command, required] of [
      ['resolve', '--note <text>'],
      ['cancel', '--reason <text>'],
      ['reopen', '--attempts <n>'],
      ['ack', '--assignee <name>'],
    ]) {
      const help = runCli([command, '--help']);
      expect(help.status).toBe(0);
      const line = help.stdout.split('\n').find((text) => text.trimStart().startsWith(required));
      expect({ command, line }).toEqual({ command, line: expect.stringContaining('(required)') });
    }
  });

  it('a cancel refused for an unknown outcome points at resolve, not at the log audit', async () => {
    const ref = await escalatedUnknown();
    const refused = await cli(['cancel', ref, '--reason', 'no longer wanted']);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/^recovery-ledger: 409 OUTCOME_UNVERIFIED: .*resolve it first/);
    expect(refused.stderr).not.toContain('verify it first');
  });

  it('acts on several refs in one run, one result line each, and exits 1 when any was refused', async () => {
    const [first, unknown, last] = [await planned(), await escalatedUnknown(), await planned()];
    const run = await cli(['cancel', first, unknown, last, '--reason', 'the customer withdrew']);
    expect(run.status).toBe(1);
    expect(run.stdout.trimEnd().split('\n')).toEqual([
      expect.stringMatching(new RegExp(`^${first}: StepCancelled recorded; status cancelled`)),
      expect.stringMatching(new RegExp(`^${last}: StepCancelled recorded; status cancelled`)),
    ]);
    expect(run.stderr).toContain(`recovery-ledger: ${unknown}: 409 OUTCOME_UNVERIFIED`);

    // The refs of an incident from a file, one a line; all accepted is exit 0.
    const list = join(ledger.dataDir, 'refs.txt');
    const [a, b] = [await escalatedUnknown(), await escalatedUnknown()];
    writeFileSync(list, `# incident 7\n${a}\n\n${b}\n`);
    const fromFile = await cli(['ack', '--from-file', list, '--assignee', 'ana']);
    expect(fromFile).toMatchObject({ status: 0, stderr: '' });
    expect(
      fromFile.stdout
        .trimEnd()
        .split('\n')
        .map((line) => line.split(':')[0]),
    ).toEqual([a, b]);

    const none = await cli(['cancel', '--reason', 'x']);
    expect(none.status).toBe(2);
    expect(none.stderr).toContain('name at least one operation_ref');
  });

  it('sends several refs a hundred a request (POST /v1/operator-facts), never one submit per ref, a ref listed twice acted on once', async () => {
    const refs: string[] = [];
    for (let index = 0; index < 150; index++) refs.push(await planned());
    const list = join(ledger.dataDir, 'many.txt');
    writeFileSync(list, `${refs.join('\n')}\n${refs[0]}\n`);
    const before = await postsByRoute();
    const run = await cli(['cancel', '--from-file', list, '--reason', 'the incident is closed']);
    expect(run).toMatchObject({ status: 0, stderr: '' });
    expect(
      run.stdout
        .trimEnd()
        .split('\n')
        .map((line) => line.split(': StepCancelled recorded')[0]),
    ).toEqual(refs);
    const after = await postsByRoute();
    expect({
      bulk: (after['/v1/operator-facts'] ?? 0) - (before['/v1/operator-facts'] ?? 0),
      single: (after['/v1/operations/:ref/events'] ?? 0) - (before['/v1/operations/:ref/events'] ?? 0),
    }).toEqual({ bulk: 2, single: 0 });
  });

  it('a second acknowledgement naming someone else is refused with a code; --reassign takes it over visibly', async () => {
    const ref = await escalatedUnknown();
    expect((await cli(['ack', ref, '--assignee', 'ana'])).status).toBe(0);
    const second = await cli(['ack', ref, '--assignee', 'bo']);
    expect({ status: second.status, code: /409 (\w+)/.exec(second.stderr)?.[1] }).toEqual({
      status: 1,
      code: 'ESCALATION_ALREADY_ACKNOWLEDGED',
    });
    expect(second.stderr).toContain('ana has this escalation');
    expect((await cli(['ack', ref, '--assignee', 'bo', '--reassign'])).status).toBe(0);
    const evidence = await until(
      () => cli(['evidence', ref]),
      (run) => run.stdout.includes('reassigned'),
      'the evidence trail to show the reassignment',
    );
    expect(evidence.stdout).toMatch(/escalation reassigned by key_\S+, assigned to bo/);
  });

  it('triage lists what needs a person, through the API and on the data directory', async () => {
    const ref = await escalatedUnknown();
    const listed = await until(
      () => cli(['triage', '--run-id', 'run_oncall', '--kind', 'escalated']),
      (run) => run.stdout.includes(ref),
      'the triage queue to list the escalation',
    );
    expect(listed.status).toBe(0);
    expect(listed.stdout.split('\n')[0]).toMatch(/^KIND\s+OPERATION\s+TOOL\s+STATUS\s+REASON/);
    expect(listed.stdout).toMatch(
      new RegExp(`escalated\\s+${ref}\\s+refund_payment\\s+escalated\\s+LOOKUP_UNAVAILABLE`),
    );
    const json = JSON.parse((await cli(['triage', '--json', '--kind', 'escalated'])).stdout);
    expect(json.items.map((item: { operation_ref: string }) => item.operation_ref)).toContain(ref);

    const local = await cli(['triage', '--kind', 'escalated', '--data-dir', ledger.dataDir, '--tenant', 'acme'], {
      LEDGER_URL: '',
    });
    expect(local.status).toBe(0);
    expect(local.stdout).toContain(ref);

    const wrong = await cli(['triage', '--kind', 'everything']);
    expect(wrong.status).toBe(2);
  });
});
