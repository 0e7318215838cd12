/**
 * The on-call engineer's commands (docs/operations.md, docs/contract.md §4.10) against the service
 * in this process: the triage queue, several refs in one run with one result line each, the second
 * acknowledgement that names someone else, and a help text that says which options are required.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
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

/** docs/operations.md, read as a user reads it. */
const OPERATIONS_DOC = readFileSync(resolve(__dirname, '../../docs/operations.md'), 'utf8');

describe('docs/operations.md says what the command says', () => {
  it('its `--help` printout is the real one, word for word', () => {
    const printed = /^\$ recovery-ledger --help\n([\s\S]*?)^```$/m.exec(OPERATIONS_DOC)?.[1];
    const help = runCli(['--help']);
    expect(help.status).toBe(0);
    expect(printed).toBe(help.stdout);
  });

  it('its command table has a row for every command, naming each of its options and no other', () => {
    const help = runCli(['--help']).stdout;
    const commands = /^Commands:\n([\s\S]*?)\n\n/m
      .exec(help)![1]
      .split('\n')
      .map((line) => /^ {2}(\S+)/.exec(line)?.[1])
      .filter((name): name is string => name !== undefined && name !== 'help');
    const rows = OPERATIONS_DOC.split('\n')
      .filter((line) => line.startsWith('| `'))
      .map((line) => /^\| `([^`]*)`/.exec(line)![1]);
    expect(commands.length).toBeGreaterThan(10);
    for (const command of commands) {
      const row = rows.find((text) => text === command || text.startsWith(`${command} `));
      expect({ command, row }).toEqual({ command, row: expect.any(String) });
      // projections has one subcommand, named in its row (`projections rebuild …`).
      const args = command === 'projections' ? ['projections', 'rebuild', '--help'] : [command, '--help'];
      const own = /^Options:\n([\s\S]*)$/m
        .exec(runCli(args).stdout)![1]
        .split('\n')
        .map((line) => /^ {2}(?:-\w, )?(--[a-z-]+)/.exec(line)?.[1])
        .filter((option): option is string => option !== undefined && option !== '--help');
      expect({ command, options: [...new Set(row!.match(/--[a-z-]+/g))].sort() }).toEqual({
        command,
        options: own.sort(),
      });
    }
  });
});

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

  it('resolve says that one of --found and --not-found is required, and refuses both', () => {
    const help = runCli(['resolve', '--help']).stdout.replace(/\n\s+/g, ' ');
    expect(help).toContain('(required: this or --not-found)');
    expect(help).toContain('(required: this or --found)');
    const both = runCli(['resolve', 'run_1/step_1', '--found', 'rf_1', '--not-found', '--note', 'x']);
    expect({ status: both.status, stderr: both.stderr }).toEqual({
      status: 2,
      stderr: expect.stringContaining("'--found <evidence_ref>' cannot be used with option '--not-found'"),
    });
  });

  it('a cancel refused for an unknown outcome names the command that resolves it, not the log audit', async () => {
    const ref = await escalatedUnknown();
    const refused = await cli(['cancel', ref, '--reason', 'no longer wanted']);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/^recovery-ledger: 409 OUTCOME_UNVERIFIED: .*resolve it first/);
    expect(refused.stderr).toContain(`recovery-ledger resolve ${ref} --found <evidence_ref> --note <text>`);
    expect(refused.stderr).not.toMatch(/verify it first|recovery-ledger verify/);
    // Among several refs, the refused one's line says the same.
    const other = await planned();
    const several = await cli(['cancel', ref, other, '--reason', 'no longer wanted']);
    expect(several.status).toBe(1);
    expect(several.stderr).toContain(`${ref}: 409 OUTCOME_UNVERIFIED`);
    expect(several.stderr).toContain(`recovery-ledger resolve ${ref} --found`);
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
    expect(second.stderr).toContain(`that is: recovery-ledger ack ${ref} --assignee bo --reassign`);
    expect((await cli(['ack', ref, '--assignee', 'bo', '--reassign'])).status).toBe(0);
    const evidence = await until(
      () => cli(['evidence', ref]),
      (run) => run.stdout.includes('reassigned'),
      'the evidence trail to show the reassignment',
    );
    expect(evidence.stdout).toMatch(/escalation reassigned by key_\S+, assigned to bo/);
  });

  it("triage right after the README's unknown outcome: visible at once, and a person's from when a lookup can settle it", async () => {
    const run = `run_${randomUUID().slice(0, 6)}`;
    const unknownOutcome = async (ref: string, policy?: Record<string, unknown>) => {
      for (const event of [
        fact('StepPlanned', {
          run_id: run,
          tool: 'create_invoice',
          side_effect: 'write',
          input_hash: 'sha256:9c1f',
          ...(policy ? { policy } : {}),
        }),
        fact('AttemptDispatched', { attempt: 1, input_hash: 'sha256:9c1f' }),
        fact('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.outcomeUnknown(ref) }),
      ])
        expect((await runtime().submit(ref, [event])).status).toBe(200);
    };
    // The README's first operation as printed: the default policy, whose consistency window is 30 s.
    const readme = `${run}/step_4`;
    await unknownOutcome(readme);
    // One whose window is long enough that no run of this test reaches it, and one with none.
    const slow = `${run}/step_5`;
    await unknownOutcome(slow, { consistency_window_ms: 600_000 });
    const shown = await until(
      () => cli(['triage', '--json', '--run-id', run]),
      (out) => out.stdout.includes(slow),
      'the triage answer to show the unknown outcomes',
    );
    const answer = JSON.parse(shown.stdout) as {
      items: { operation_ref: string; threshold_ms: number; threshold_from: string }[];
      waiting: { operation_ref: string; since: string; due_at: string; threshold_ms: number; threshold_from: string }[];
    };
    const readmeShown = [...answer.items, ...answer.waiting].find((item) => item.operation_ref === readme);
    // Waiting, or listed if this machine took its 30 s: judged by the plan's window either way.
    expect(readmeShown).toMatchObject({ threshold_ms: 30_000, threshold_from: 'policy' });
    expect(answer.items.map((item) => item.operation_ref)).not.toContain(slow);
    const waiting = answer.waiting.find((item) => item.operation_ref === slow)!;
    expect(waiting).toMatchObject({ threshold_ms: 600_000, threshold_from: 'policy' });
    expect(Date.parse(waiting.due_at) - Date.parse(waiting.since)).toBe(600_000);

    const text = await cli(['triage', '--run-id', run]);
    expect(text.status).toBe(0);
    expect(text.stdout).not.toMatch(/^nothing needs a person \(/m);
    expect(text.stdout).toMatch(/^WAITING\s+OPERATION\s+TOOL\s+REASON\s+NEEDS A PERSON AT\s+IN$/m);
    expect(text.stdout).toMatch(
      new RegExp(`^unknown_outcome\\s+${slow}\\s+create_invoice\\s+OUTCOME_UNKNOWN\\s+${waiting.due_at}`, 'm'),
    );
    expect(text.stdout).toMatch(/unknown outcomes? waiting for a lookup/);

    // No window: a lookup can settle it at once, so it needs a person at once.
    const now = `${run}/step_6`;
    await unknownOutcome(now, { consistency_window_ms: 0 });
    const listed = await until(
      () => cli(['triage', '--run-id', run, '--kind', 'unknown_outcome']),
      (out) => out.stdout.includes(now),
      'the unknown outcome without a window to be listed',
    );
    expect(listed.stdout).toMatch(
      new RegExp(`^unknown_outcome\\s+${now}\\s+create_invoice\\s+verifying\\s+OUTCOME_UNKNOWN`, 'm'),
    );

    // On the data directory, the same reading.
    const local = await cli(['triage', '--run-id', run, '--data-dir', ledger.dataDir, '--tenant', 'acme'], {
      LEDGER_URL: '',
    });
    expect(local.status).toBe(0);
    expect(local.stdout).toMatch(new RegExp(`^unknown_outcome\\s+${now}\\s`, 'm'));
    expect(local.stdout).toMatch(
      new RegExp(`^unknown_outcome\\s+${slow}\\s+create_invoice\\s+OUTCOME_UNKNOWN\\s+${waiting.due_at}`, 'm'),
    );
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
