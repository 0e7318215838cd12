/**
 * The CLI against a running service (--url, --key or LEDGER_URL, LEDGER_API_KEY): it reads what
 * the key may read through the public API, and an admin key exports, verifies and rebuilds the
 * service's own log and read models.
 */
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { CloudEvent, HTTP } from 'cloudevents';
import { committed, runCli, tempDataDir, unknownOutcome } from '../support/cli-harness';
import { committedPosition, request, submitFact } from '../support/http';
import { freePort, startLedger, type LedgerProcess } from '../support/ledger-process';

const RUNTIME = 'cli-remote-runtime-key-01';
const AUDITOR = 'cli-remote-auditor-key-01';
const ADMIN = 'cli-remote-admin-key-0001';
const REF = 'run_81/step_4';
let ledger: LedgerProcess;
let scratch: string;
let lastPosition = 0;

async function submit(ref: string, type: string, data: Record<string, unknown>): Promise<void> {
  const answer = await submitFact(ledger.baseUrl, ref, type, data, { authorization: `Bearer ${RUNTIME}` });
  lastPosition = committedPosition(answer, type, { refusals: 'allowed' }) ?? lastPosition;
}

const remote = (key: string, ...args: string[]) => runCli([...args, '--url', ledger.baseUrl, '--key', key]);

beforeAll(async () => {
  scratch = tempDataDir('remote-scratch');
  ledger = await startLedger({
    env: { LEDGER_API_KEYS: `${RUNTIME}:runtime:acme,${AUDITOR}:auditor:acme,${ADMIN}:admin:acme` },
  });
  await submit(REF, 'StepPlanned', {
    run_id: 'run_81',
    tool: 'create_invoice',
    side_effect: 'write',
    input_hash: 'h1',
    policy: { verification_tool: 'get_invoice_by_operation_ref' },
  });
  await submit(REF, 'AttemptDispatched', { attempt: 1, input_hash: 'h1' });
  await submit(REF, 'EnvelopeRecorded', { attempt: 1, envelope: unknownOutcome(REF) });
  await submit(REF, 'AttemptDispatched', { attempt: 2, input_hash: 'h1' });
  await submit(REF, 'VerificationRecorded', {
    outcome: 'found_committed',
    checked_at: new Date().toISOString(),
    evidence_ref: 'inv_123',
  });
  await submit('run_81/step_5', 'StepPlanned', {
    run_id: 'run_81',
    tool: 'send_email',
    side_effect: 'write',
    input_hash: 'h2',
  });
  await submit('run_81/step_5', 'AttemptDispatched', { attempt: 1, input_hash: 'h2' });
  await submit('run_81/step_5', 'EnvelopeRecorded', { attempt: 1, envelope: committed('run_81/step_5', 'msg_1') });
  const caughtUp = await request(
    ledger.baseUrl,
    'GET',
    `/v1/operations/${encodeURIComponent(REF)}/evidence?wait_for_position=${lastPosition}&wait_timeout_ms=20000`,
    undefined,
    { authorization: `Bearer ${AUDITOR}` },
  );
  if (caughtUp.status !== 200) throw new Error(`projections did not catch up: ${JSON.stringify(caughtUp.body)}`);
});

afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
  rmSync(scratch, { recursive: true, force: true });
});

describe('the CLI against a service', () => {
  it('replay reads the operation through the API with an auditor key', () => {
    const run = remote(AUDITOR, 'replay', REF, '--json');
    expect(run.stderr).toBe('');
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
    ]);
    expect(timeline.rows[6].why).toBe('dispatch of attempt 2 refused: VERIFY_BEFORE_RETRY');
  });

  it('replay answers the same timeline through the API as from the data directory', () => {
    const served = remote(AUDITOR, 'replay', REF, '--json');
    const local = runCli(['replay', REF, '--data-dir', ledger.dataDir, '--tenant', 'acme', '--json']);
    expect(local.status).toBe(0);
    expect(JSON.parse(served.stdout)).toEqual(JSON.parse(local.stdout));
  });

  it('evidence reads the projection through the API', () => {
    const run = remote(AUDITOR, 'evidence', REF);
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('verdict:   committed — verified via get_invoice_by_operation_ref, evidence inv_123');
  });

  it('takes the service and the key from LEDGER_URL and LEDGER_API_KEY', () => {
    const run = runCli(['replay', REF], { LEDGER_URL: ledger.baseUrl, LEDGER_API_KEY: AUDITOR });
    expect(run.status).toBe(0);
    expect(run.stdout.split('\n')[0]).toBe(`${REF}: 9 events, state succeeded`);
  });

  it('export with an admin key is the log the data directory holds, and imports and verifies', () => {
    const file = join(scratch, 'remote.ndjson');
    const run = remote(ADMIN, 'export', '--out', file);
    expect(run.status).toBe(0);
    expect(run.stderr).toBe(`exported 15 events in 2 streams to ${file}\n`);
    // The same events as an export of the service's own data directory (without the header's instant).
    const local = runCli(['export', '--data-dir', ledger.dataDir]);
    expect(readFileSync(file, 'utf8').split('\n').slice(1)).toEqual(local.stdout.split('\n').slice(1));
    const target = join(scratch, 'imported');
    expect(runCli(['import', file, '--data-dir', target]).status).toBe(0);
    expect(runCli(['verify', '--data-dir', target]).stdout).toBe(
      'verified 15 events in 2 streams: every hash chain holds\n',
    );
  });

  it('export --format cloudevents with an admin key writes the CloudEvents a local export writes', () => {
    const run = remote(ADMIN, 'export', '--format', 'cloudevents');
    expect(run.status).toBe(0);
    expect(run.stderr).toBe('exported 15 events in 2 streams\n');
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(15);
    for (const line of lines) {
      const received = HTTP.toEvent({
        headers: { 'content-type': 'application/cloudevents+json; charset=utf-8' },
        body: line,
      }) as CloudEvent;
      expect(received.validate()).toBe(true);
    }
    expect(JSON.parse(lines[0])).toMatchObject({ subject: REF, chainprevhash: '0'.repeat(64) });
    const local = runCli(['export', '--data-dir', ledger.dataDir, '--tenant', 'acme', '--format', 'cloudevents']);
    expect(run.stdout).toBe(local.stdout);
  });

  it("verify with an admin key checks the service's chains", () => {
    const run = remote(ADMIN, 'verify');
    expect(run.status).toBe(0);
    expect(run.stdout).toBe('verified 15 events in 2 streams: every hash chain holds\n');
  });

  it('projections rebuild with an admin key rebuilds in the service and waits until it has caught up', async () => {
    const run = remote(ADMIN, 'projections', 'rebuild', '--progress', 'never');
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(
      new RegExp(`^rebuilt step_state, evidence_trail, run_summary, trust_metrics on ${ledger.baseUrl} in `),
    );
    const evidence = await request(
      ledger.baseUrl,
      'GET',
      `/v1/operations/${encodeURIComponent(REF)}/evidence`,
      undefined,
      { authorization: `Bearer ${AUDITOR}` },
    );
    expect(evidence.status).toBe(200);
    expect(evidence.body.as_of_position).toBe(lastPosition);
  });

  it('a key that may not do it is a failure (exit 1) naming the code', () => {
    const forbidden = remote(AUDITOR, 'export');
    expect(forbidden.status).toBe(1);
    expect(forbidden.stderr).toMatch(/^recovery-ledger: 403 FORBIDDEN: /);
    const unknown = remote('not-a-key-000000000000', 'replay', REF);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toMatch(/^recovery-ledger: 401 UNAUTHENTICATED: /);
    const missing = remote(AUDITOR, 'replay', 'run_0/none');
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/^recovery-ledger: 404 OPERATION_NOT_FOUND: /);
  });

  it('a service that cannot be reached exits 3', async () => {
    const run = runCli(['replay', REF, '--url', `http://127.0.0.1:${await freePort()}`]);
    expect(run.status).toBe(3);
    expect(run.stderr).toMatch(/cannot reach http:\/\/127\.0\.0\.1:\d+: ECONNREFUSED/);
  });
});
