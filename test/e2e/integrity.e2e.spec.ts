/**
 * A damaged or rolled-back log and read model, against the built service and CLI as processes of
 * their own (stopped, edited on disk, started again), one describe block per subject. Each block
 * keeps its own header, constants and hooks.
 */

import { randomUUID } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli, tempDataDir } from '../support/cli-harness';
import { fact, opPath, request, submitFact, committedPosition } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { until } from '../support/until';
import Database from 'better-sqlite3';
import {
  rewriteEverything,
  seededLogsForFile,
  tamperedCopy,
  TAMPER_CASES,
  type TamperCase,
} from '../support/log-tampering';

describe('a log rolled back', () => {
  /**
   * A log rolled back to an older copy (docs/security.md, "A log rolled back"): every check inside
   * the store passes on it, since it was once the true log. What has seen more says so: the head
   * witness kept outside the data directory (the whole directory restored), or a read model ahead
   * of the log (the log file alone restored). The service then refuses every write with
   * HISTORY_ROLLED_BACK (a step that succeeded after the copy must not be dispatched again),
   * readiness answers it, `verify` exits non-zero, and only an operator's LEDGER_ACCEPT_ROLLBACK
   * starts it on the older log.
   */
  const ANCHOR_KEY = 'k'.repeat(16) + randomUUID().replace(/-/g, '');
  const PLAN = { run_id: 'run_rb', tool: 'create_invoice', side_effect: 'write', input_hash: 'sha256:rb' };

  interface Answer {
    status: number;
    body: { code?: string; position?: number; [key: string]: unknown };
  }

  const submit = (ledger: LedgerProcess, ref: string, type: string, data: Record<string, unknown>) =>
    submitFact(ledger.baseUrl, ref, type, data) as Promise<Answer>;

  async function ok(ledger: LedgerProcess, ref: string, type: string, data: Record<string, unknown>): Promise<number> {
    const answer = await submit(ledger, ref, type, data);
    expect(answer).toMatchObject({ status: 200 });
    return answer.body.position as number;
  }

  /** Plans, dispatches and records the success of a step; answers the last position. */
  async function succeed(ledger: LedgerProcess, ref: string): Promise<number> {
    await ok(ledger, ref, 'StepPlanned', PLAN);
    await ok(ledger, ref, 'AttemptDispatched', { attempt: 1, input_hash: PLAN.input_hash });
    return ok(ledger, ref, 'EnvelopeRecorded', {
      attempt: 1,
      envelope: seedEnvelopes.success(ref, `inv_${ref.length}`),
    });
  }

  async function get(ledger: LedgerProcess, path: string): Promise<Answer> {
    const response = await fetch(`${ledger.baseUrl}${path}`);
    return { status: response.status, body: (await response.json()) as Answer['body'] };
  }

  /** The read models have applied up to `position` (so a checkpoint past it is stored). */
  async function projected(ledger: LedgerProcess, ref: string, position: number): Promise<void> {
    const answer = await get(
      ledger,
      `/v1/operations/${encodeURIComponent(ref)}/evidence?wait_for_position=${position}`,
    );
    expect(answer.status).toBe(200);
  }

  const readiness = (ledger: LedgerProcess) => get(ledger, '/health/ready');
  const integrityOf = (answer: Answer) =>
    (
      (answer.body.details ?? answer.body.error ?? {}) as Record<
        string,
        { code?: string; rollback?: { state: string; evidence?: string[] } }
      >
    ).integrity;

  /** Copies the files of the data directory whose names start with `prefix` (all: ''). */
  function copyFiles(from: string, to: string, prefix = ''): void {
    cpSync(from, to, {
      recursive: true,
      filter: (source) => source === from || source.slice(from.length + 1).startsWith(prefix),
    });
  }

  describe('a log rolled back to an older copy', () => {
    const dirs: string[] = [];
    let ledger: LedgerProcess | undefined;
    const temp = (label: string) => {
      const dir = mkdtempSync(join(tmpdir(), `ledger-rollback-${label}-`));
      dirs.push(dir);
      return dir;
    };

    afterEach(async () => {
      await ledger?.stop();
      ledger = undefined;
    });

    afterAll(() => {
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    });

    // Four starts and stops of the built service: more than the default minute on a busy machine.
    it('the whole data directory restored: the witness outside it refuses writes, fails readiness and verify, until accepted', async () => {
      const dataDir = temp('data');
      const witness = join(temp('witness'), 'head-witness.json');
      const env = {
        LEDGER_ANCHOR_KEY: ANCHOR_KEY,
        LEDGER_HEAD_WITNESS_FILE: witness,
        LEDGER_HEAD_WITNESS_INTERVAL_MS: '20',
      };

      ledger = await startLedger({ dataDir, env });
      await succeed(ledger, 'run_rb/step_1');
      // Planned before the copy is taken, dispatched and succeeded after it.
      await ok(ledger, 'run_rb/step_2', 'StepPlanned', PLAN);
      await ledger.stop();
      const backup = temp('backup');
      copyFiles(dataDir, backup);

      ledger = await ledger.restart();
      await ok(ledger, 'run_rb/step_2', 'AttemptDispatched', { attempt: 1, input_hash: PLAN.input_hash });
      await ok(ledger, 'run_rb/step_2', 'EnvelopeRecorded', {
        attempt: 1,
        envelope: seedEnvelopes.success('run_rb/step_2', 'inv_2'),
      });
      const last = await succeed(ledger, 'run_rb/step_3');
      await ledger.stop();
      // Written at shutdown at the latest: the head the log reached.
      expect(JSON.parse(readFileSync(witness, 'utf8'))).toMatchObject({
        format: 'recovery-ledger-head-witness',
        position: last,
      });

      rmSync(dataDir, { recursive: true, force: true });
      copyFiles(backup, dataDir);

      // Every check inside the store holds on the older copy: only the witness tells.
      expect(runCli(['verify', '--data-dir', dataDir], { LEDGER_ANCHOR_KEY: ANCHOR_KEY }).status).toBe(0);
      const verify = runCli(['verify', '--data-dir', dataDir, '--witness', witness], { LEDGER_ANCHOR_KEY: ANCHOR_KEY });
      expect(verify.status).toBe(1);
      expect(verify.stdout).toMatch(
        /^ROLLED BACK log_behind_witness: the log holds \d+ events up to position \d+; the witness written at .* records \d+ events up to position \d+: the log was rolled back to an older copy$/m,
      );
      expect(verify.stderr).toMatch(/^recovery-ledger: HISTORY_ROLLED_BACK: /m);
      // The setting the service reads is read by verify too.
      expect(
        runCli(['verify', '--data-dir', dataDir], { LEDGER_ANCHOR_KEY: ANCHOR_KEY, LEDGER_HEAD_WITNESS_FILE: witness })
          .status,
      ).toBe(1);

      ledger = await ledger.restart();
      const ready = await readiness(ledger);
      expect(ready.status).toBe(503);
      expect(integrityOf(ready)).toMatchObject({
        status: 'down',
        code: 'HISTORY_ROLLED_BACK',
        rollback: { state: 'rolled_back', evidence: ['log_behind_witness'] },
      });
      // The step that succeeded after the copy reads as planned only: its dispatch is refused, not granted.
      const dispatch = await submit(ledger, 'run_rb/step_2', 'AttemptDispatched', {
        attempt: 1,
        input_hash: PLAN.input_hash,
      });
      expect(dispatch).toMatchObject({ status: 503, body: { code: 'HISTORY_ROLLED_BACK' } });
      const replan = await submit(ledger, 'run_rb/step_3', 'StepPlanned', PLAN);
      expect(replan).toMatchObject({ status: 503, body: { code: 'HISTORY_ROLLED_BACK' } });
      // Nor is any step handed out to a worker under a lease.
      expect(await get(ledger, '/v1/work?tool=create_invoice')).toMatchObject({
        status: 503,
        body: { code: 'HISTORY_ROLLED_BACK' },
      });
      expect(ledger.output()).toMatch(/THE LOG WAS ROLLED BACK/);
      expect(ledger.output()).toMatch(/log_behind_witness/);
      await ledger.stop();
      // Refused writes stored nothing, and the witness still records the newer head.
      expect(JSON.parse(readFileSync(witness, 'utf8'))).toMatchObject({ position: last });

      // The operator keeps the older log, says why, and the service says so.
      ledger = await startLedger({
        dataDir,
        port: ledger.port,
        env: {
          ...env,
          LEDGER_ACCEPT_ROLLBACK: '1',
          LEDGER_ACCEPT_ROLLBACK_REASON: 'the newer disk is lost; keeping the nightly copy',
        },
      });
      const accepted = await until(
        () => readiness(ledger as LedgerProcess),
        (answer) => answer.status === 200,
        'readiness after accepting the rollback',
      );
      expect(integrityOf(accepted)).toMatchObject({
        rollback: { state: 'accepted', evidence: ['log_behind_witness'] },
      });
      expect(ledger.output()).toMatch(/LOG ROLLBACK ACCEPTED/);
      expect(ledger.output()).toMatch(/the newer disk is lost; keeping the nightly copy/);
      await ok(ledger, 'run_rb/step_4', 'StepPlanned', PLAN);
      await ledger.stop();
      // The witness now follows the accepted log.
      expect(
        runCli(['verify', '--data-dir', dataDir, '--witness', witness], { LEDGER_ANCHOR_KEY: ANCHOR_KEY }).status,
      ).toBe(0);
    }, 180_000);

    it('the log file alone restored, no witness: read models ahead of the log are the evidence', async () => {
      const dataDir = temp('data');
      // No witness at all (the default one off): the evidence is what the data directory holds.
      ledger = await startLedger({ dataDir, env: { LEDGER_HEAD_WITNESS_FILE: 'off' } });
      await projected(ledger, 'run_rb/step_1', await succeed(ledger, 'run_rb/step_1'));
      await ledger.stop();
      const backup = temp('log');
      copyFiles(dataDir, backup, 'events.sqlite');

      ledger = await ledger.restart();
      // The dispatch sent with an Idempotency-Key: its kept answer is in a file of its own, not in the
      // log restored below, so it remembers a grant the older log does not hold.
      await ok(ledger, 'run_rb/step_2', 'StepPlanned', PLAN);
      const keyedDispatch = {
        events: [fact('AttemptDispatched', { attempt: 1, input_hash: PLAN.input_hash })],
      };
      const sendKeyed = (at: LedgerProcess) =>
        request(at.baseUrl, 'POST', `${opPath('run_rb/step_2')}/events`, keyedDispatch, {
          'idempotency-key': '"rb-dispatch-1"',
        });
      expect((await sendKeyed(ledger)).status).toBe(200);
      await projected(
        ledger,
        'run_rb/step_2',
        await ok(ledger, 'run_rb/step_2', 'EnvelopeRecorded', {
          attempt: 1,
          envelope: seedEnvelopes.success('run_rb/step_2', 'inv_2'),
        }),
      );
      await ledger.stop();

      for (const file of ['events.sqlite', 'events.sqlite-wal', 'events.sqlite-shm'])
        rmSync(join(dataDir, file), { force: true });
      copyFiles(backup, dataDir);
      expect(existsSync(join(dataDir, 'read-models.sqlite'))).toBe(true);

      const verify = runCli(['verify', '--data-dir', dataDir, '--json']);
      expect(verify.status).toBe(1);
      const report = JSON.parse(verify.stdout) as {
        ok: boolean;
        findings: unknown[];
        rollback: { rolled_back: boolean; findings: Array<{ kind: string }> };
      };
      expect(report).toMatchObject({ ok: false, findings: [], rollback: { rolled_back: true } });
      expect(report.rollback.findings.map((finding) => finding.kind)).toEqual(
        expect.arrayContaining(['read_model_ahead', 'read_model_operation_ahead']),
      );

      ledger = await ledger.restart();
      const ready = await readiness(ledger);
      expect(ready.status).toBe(503);
      expect(integrityOf(ready)).toMatchObject({ code: 'HISTORY_ROLLED_BACK', rollback: { state: 'rolled_back' } });
      // Absent from the old log, so planning it again would be the first step to a second write.
      expect(await submit(ledger, 'run_rb/step_2', 'StepPlanned', PLAN)).toMatchObject({
        status: 503,
        body: { code: 'HISTORY_ROLLED_BACK' },
      });
      // Nor is the lost history's answer replayed to a resend under its kept Idempotency-Key.
      const resent = await sendKeyed(ledger);
      expect({ status: resent.status, code: (resent.body as { code?: string }).code }).toEqual({
        status: 503,
        code: 'HISTORY_ROLLED_BACK',
      });
      // The read models are kept as the evidence, not rebuilt down to the old log, even when asked.
      expect(ledger.output()).toMatch(/the read models are kept as they stand/);
      const rebuild = await fetch(`${ledger.baseUrl}/v1/admin/projections/rebuild`, { method: 'POST' });
      expect({ status: rebuild.status, code: ((await rebuild.json()) as { code?: string }).code }).toEqual({
        status: 503,
        code: 'HISTORY_ROLLED_BACK',
      });
      await ledger.stop();
      expect(runCli(['verify', '--data-dir', dataDir]).status).toBe(1);
      // Nor rebuilt down offline by the CLI.
      const offline = runCli(['projections', 'rebuild', '--data-dir', dataDir, '--progress', 'never']);
      expect(offline.status).toBe(1);
      expect(offline.stderr).toMatch(/^recovery-ledger: HISTORY_ROLLED_BACK: .*read_model_ahead/m);
      expect(runCli(['verify', '--data-dir', dataDir]).status).toBe(1);
    }, 180_000);
  });
});

describe('a read model edited while the service was stopped', () => {
  /**
   * A read model edited while the service was stopped (docs/reliability.md, "A corrupted read
   * model"): `verify --read-models` names what differs from the log, the recovery listing never
   * hides an operation in doubt (it answers from the store's index, committed with the events), and
   * the restarted service rebuilds the damaged read model instead of serving it.
   */
  const REF = 'run_rm/step_1';
  const DONE = 'run_rm/step_2';

  async function submit(ledger: LedgerProcess, ref: string, type: string, data: Record<string, unknown>) {
    return { position: committedPosition(await submitFact(ledger.baseUrl, ref, type, data), type) as number };
  }

  async function get<T>(ledger: LedgerProcess, path: string): Promise<{ status: number; body: T }> {
    const response = await fetch(`${ledger.baseUrl}${path}`);
    return { status: response.status, body: (await response.json()) as T };
  }

  describe('a read model edited behind the service', () => {
    let ledger: LedgerProcess;

    afterAll(async () => {
      await ledger?.stop();
      ledger?.cleanup();
    });

    it('is reported by verify, never hides an operation in doubt, and is rebuilt at start', async () => {
      ledger = await startLedger();
      const plan = { run_id: 'run_rm', tool: 'create_invoice', side_effect: 'write', input_hash: 'sha256:rm' };
      await submit(ledger, REF, 'StepPlanned', plan);
      await submit(ledger, REF, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:rm' });
      await submit(ledger, REF, 'EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.outcomeUnknown(REF) });
      await submit(ledger, DONE, 'StepPlanned', plan);
      await submit(ledger, DONE, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:rm' });
      const last = await submit(ledger, DONE, 'EnvelopeRecorded', {
        attempt: 1,
        envelope: seedEnvelopes.success(DONE, 'inv_9'),
      });
      const evidence = await get<{ status: string }>(
        ledger,
        `/v1/operations/${encodeURIComponent(REF)}/evidence?wait_for_position=${last.position}`,
      );
      expect(evidence.body.status).toBe('verifying');
      await ledger.stop();

      // The operator's bad day: the evidence says succeeded, the in-doubt step is gone from the state index.
      const db = new Database(join(ledger.dataDir, 'read-models.sqlite'));
      db.prepare("UPDATE rm_evidence_trail SET doc = json_set(doc, '$.status', 'succeeded') WHERE key LIKE ?").run(
        `%${REF}`,
      );
      db.prepare('DELETE FROM rm_step_state WHERE key LIKE ?').run(`%${REF}`);
      db.close();

      const verify = runCli(['verify', '--data-dir', ledger.dataDir, '--read-models', '--json']);
      expect(verify.status).toBe(1);
      const report = JSON.parse(verify.stdout) as {
        ok: boolean;
        read_models: { ok: boolean; differences: Array<{ projection: string; kind: string }> };
      };
      expect(report.ok).toBe(false);
      expect(report.read_models.differences).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ projection: 'evidence_trail', kind: 'differs' }),
          expect.objectContaining({ projection: 'step_state', kind: 'missing' }),
        ]),
      );

      ledger = await ledger.restart();
      // From the store's index: the operation in doubt is listed whatever the read model says.
      const recovery = await get<{ items: Array<{ operation_ref: string; status: string }> }>(ledger, '/v1/recovery');
      expect(recovery.body.items.map((item) => [item.operation_ref, item.status])).toEqual([[REF, 'verifying']]);

      // Once the check and rebuild are done, what is served is what the log gives.
      let served: { status: number; body: { status?: string } } | undefined;
      for (let polls = 0; polls < 200; polls++) {
        served = await get<{ status?: string }>(ledger, `/v1/operations/${encodeURIComponent(REF)}/evidence`);
        if (served.status === 200) break;
        expect(served.status).toBe(503);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(served?.body.status).toBe('verifying');
      const listed = await get<{ items: Array<{ operation_ref: string }> }>(ledger, '/v1/operations?status=verifying');
      expect(listed.body.items.map((item) => item.operation_ref)).toEqual([REF]);
      await ledger.stop();
      expect(runCli(['verify', '--data-dir', ledger.dataDir, '--read-models']).status).toBe(0);
    });
  });
});

describe('the log tampered with', () => {
  /**
   * Every way of damaging the log that this suite knows (test/support/log-tampering.ts), each on its
   * own copy of a real events file: `recovery-ledger verify` reports it (never a stack trace, never
   * stopping at the first fault) (docs/reliability.md, "A log whose every loss is detectable"). The
   * service started on each damaged file is test/int/integrity-damaged-start.int.spec.ts's: it needs
   * no process of its own.
   */
  const ANCHOR_KEY = 'k'.repeat(16) + randomUUID().replace(/-/g, '');
  const logs = seededLogsForFile(ANCHOR_KEY);

  describe('verify on a log damaged behind the ledger', () => {
    it('passes on the untouched log, with and without an anchor key', () => {
      expect(runCli(['verify', '--data-dir', logs.plain()]).status).toBe(0);
      expect(runCli(['verify', '--data-dir', logs.keyed()], { LEDGER_ANCHOR_KEY: ANCHOR_KEY }).status).toBe(0);
    });

    it.each(TAMPER_CASES.map((tamper) => [tamper.name, tamper] as const))('detects %s', (_name, tamper: TamperCase) => {
      const env: Record<string, string> = tamper.needsAnchorKey ? { LEDGER_ANCHOR_KEY: ANCHOR_KEY } : {};
      const dir = tamperedCopy(tamper.needsAnchorKey ? logs.keyed() : logs.plain(), tamper.apply);
      try {
        const run = runCli(['verify', '--data-dir', dir, '--json'], env);
        expect(run.stderr).not.toMatch(/\n\s+at /);
        expect(run.status).toBe(1);
        const report = JSON.parse(run.stdout) as { ok: boolean; findings: Array<{ kind: string; stream?: string }> };
        expect(report.ok).toBe(false);
        for (const kind of tamper.expect) expect(report.findings.map((finding) => finding.kind)).toContain(kind);
        const text = runCli(['verify', '--data-dir', dir], env);
        expect(text.status).toBe(1);
        expect(text.stdout).toMatch(/^BROKEN /m);
        expect(text.stderr).toMatch(/^recovery-ledger: /);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('reports every broken stream, not only the first', () => {
      const dir = tamperedCopy(logs.plain(), (db) => {
        db.prepare("UPDATE events SET data = json_set(data, '$.input_hash', 'x') WHERE revision = 0").run();
      });
      try {
        const report = JSON.parse(runCli(['verify', '--data-dir', dir, '--json']).stdout) as {
          broken_streams: string[];
        };
        expect(report.broken_streams).toEqual([
          'op-default:run_81/step_4',
          'op-default:run_81/step_5',
          'op-default:run_82/step_1',
        ]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a whole log rewritten with its anchors is caught by an earlier checkpoint (and only so, without a key)', () => {
      const checkpoint = join(logs.plain(), '..', `checkpoint-${randomUUID()}.json`);
      expect(runCli(['verify', '--data-dir', logs.plain(), '--checkpoint-out', checkpoint]).status).toBe(0);
      const dir = tamperedCopy(logs.plain(), rewriteEverything);
      try {
        // Said plainly in docs/reliability.md: without a key or a checkpoint this is undetectable.
        expect(runCli(['verify', '--data-dir', dir]).status).toBe(0);
        const since = runCli(['verify', '--data-dir', dir, '--since', checkpoint, '--json']);
        expect(since.status).toBe(1);
        expect(JSON.parse(since.stdout).findings.map((finding: { kind: string }) => finding.kind)).toContain(
          'checkpoint_mismatch',
        );
        // The untouched log has only grown since its own checkpoint.
        expect(runCli(['verify', '--data-dir', logs.plain(), '--since', checkpoint]).status).toBe(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
        rmSync(checkpoint, { force: true });
      }
    });
  });

  describe('an export checked offline against the heads and anchor in its footer', () => {
    function exported(): { file: string; lines: Array<Record<string, unknown>> } {
      const file = join(logs.plain(), '..', `export-${randomUUID()}.ndjson`);
      expect(runCli(['export', '--data-dir', logs.plain(), '--out', file]).status).toBe(0);
      return {
        file,
        lines: readFileSync(file, 'utf8')
          .trimEnd()
          .split('\n')
          .map((line) => JSON.parse(line)),
      };
    }

    /** Drops events from the file and fixes the footer's counts, as someone hiding the cut would. */
    function without(
      lines: Array<Record<string, unknown>>,
      drop: (event: Record<string, unknown>, index: number) => boolean,
    ): string {
      const events = lines.slice(1, -1).filter((event, index) => !drop(event, index));
      const footer = {
        ...lines[lines.length - 1],
        events: events.length,
        streams: new Set(events.map((event) => event.stream)).size,
      };
      return [lines[0], ...events, footer].map((line) => JSON.stringify(line)).join('\n') + '\n';
    }

    it('passes on the file as exported, and finds a cut tail, a dropped stream and a broken anchor', () => {
      const { file, lines } = exported();
      try {
        expect(runCli(['verify', '--archive', file]).status).toBe(0);
        const lastOfTarget = Math.max(
          ...lines.slice(1, -1).flatMap((event, index) => (event.stream === 'op-default:run_81/step_4' ? [index] : [])),
        );
        const cases: Array<[string, (event: Record<string, unknown>, index: number) => boolean, string[]]> = [
          ['a cut tail', (_event, index) => index === lastOfTarget, ['head_mismatch', 'log_anchor_mismatch']],
          [
            'a dropped stream',
            (event) => event.stream === 'op-default:run_81/step_5',
            ['stream_deleted', 'log_anchor_mismatch'],
          ],
        ];
        for (const [, drop, kinds] of cases) {
          writeFileSync(file, without(lines, drop));
          const run = runCli(['verify', '--archive', file, '--json']);
          expect(run.status).toBe(1);
          const found = (JSON.parse(run.stdout) as { findings: Array<{ kind: string }> }).findings.map(
            (finding) => finding.kind,
          );
          for (const kind of kinds) expect(found).toContain(kind);
          // And import refuses such a file before writing anything.
          const target = tempDataDir('import-cut');
          const imported = runCli(['import', file, '--data-dir', target]);
          expect(imported.status).toBe(1);
          expect(imported.stderr).toMatch(/nothing was imported/);
          rmSync(target, { recursive: true, force: true });
        }
      } finally {
        rmSync(file, { force: true });
      }
    });
  });
});
