/**
 * The built CLI as a process of its own, one describe block per subject: beside a running service,
 * an operator's commands, a projections rebuild against the live read model, and --url against a
 * running service. Each block keeps its own header, constants and hooks.
 */

import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { CloudEvent, HTTP } from 'cloudevents';
import {
  committed,
  runCli,
  tempDataDir,
  unknownOutcome,
  startCli,
  type CliRun,
  invalidInput,
} from '../support/cli-harness';
import { committedPosition, request, submitFact, fact, opPath, ledgerAt } from '../support/http';
import { freePort, startLedger, type LedgerProcess } from '../support/ledger-process';
import { randomUUID } from 'node:crypto';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { until } from '../support/until';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { readModelFile, SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';

describe('against a running service (--url)', () => {
  /**
   * The CLI against a running service (--url, --key or LEDGER_URL, LEDGER_API_KEY): it reads what
   * the key may read through the public API, and an admin key exports, verifies and rebuilds the
   * service's own log and read models.
   */
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
      expect(run.stdout).toContain(
        'verdict:   committed — verified via get_invoice_by_operation_ref, evidence inv_123',
      );
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
});

describe('beside a running service', () => {
  /**
   * The CLI on the data directory of a service that is running: `verify --since` says what it proved
   * (the log only grew since the checkpoint), and `projections rebuild` refuses to run a second
   * projection engine beside the service's, until the service has stopped.
   */
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
        // What the plain verify says of the chains, then the default head witness (the running service
        // rewrites it between the two runs, so its time and position may differ), then what --since proved.
        const [verified, ...afterVerified] = since.stdout.trimEnd().split('\n');
        expect(verified).toBe(plain.stdout.trimEnd().split('\n')[0]);
        const witnessed = afterVerified[0]?.startsWith('head witness of ') === true;
        if (witnessed) expect(afterVerified[0]).toMatch(/: the log holds it( and has grown since)?$/);
        const [proved, ...rest] = witnessed ? afterVerified.slice(1) : afterVerified;
        const taken = JSON.parse(readFileSync(checkpoint, 'utf8')) as {
          taken_at: string;
          anchor: { events: number; position: number };
          heads: unknown[];
        };
        const json = JSON.parse(
          runCli(['verify', '--data-dir', ledger.dataDir, '--since', checkpoint, '--json']).stdout,
        );
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
});

describe("an operator's commands", () => {
  /**
   * `recovery-ledger resolve|cancel|reopen|ack` against the built service as a real process
   * (docs/contract.md §4.10): an escalated step driven to a terminal state from the command line
   * with its evidence on record, and the same refusals as the HTTP API, printed with the problem's
   * code and exit 1.
   */
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
      expect(both.stderr).toContain("option '--found <evidence_ref>' cannot be used with option '--not-found'");
      const neither = await cli(['resolve', ref, '--note', 'x']);
      expect(neither.status).toBe(2);
      expect(neither.stderr).toContain('exactly one of --found <evidence_ref> and --not-found');
    });
  });
});

describe('projections rebuild', () => {
  /**
   * `recovery-ledger projections rebuild` gives, from zero, byte for byte the read model the built
   * service produced live while the events were being submitted to it over HTTP.
   */
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
});
