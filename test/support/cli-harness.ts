/**
 * For the CLI tests (test/int/cli-*.int.spec.ts): a store seeded through the ledger's own command
 * path on a temporary data directory, with a clock that moves a fixed step per submit so that the
 * output is the same on every run, and the built binary run as a user runs it.
 */
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { LedgerProblem, type SubmitAnswer, type SubmitContext, type SubmittedEvent } from '@recovery-ledger/core';
import { loadConfig } from '../../src/config/ledger-config';
import { LedgerService } from '../../src/ledger/ledger.service';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { untilTrue } from './until';

export const CLI = resolve(__dirname, '../../dist/src/cli/main.js');

export interface CliRun {
  status: number | null;
  stdout: string;
  stderr: string;
}

const cliEnv = (env: Record<string, string>) => {
  const base = { ...process.env };
  // The caller's environment must not point the binary at a real ledger.
  delete base.LEDGER_DATA_DIR;
  delete base.LEDGER_URL;
  delete base.LEDGER_API_KEY;
  delete base.LEDGER_STORE;
  return { ...base, ...env };
};

export function runCli(args: readonly string[], env: Record<string, string> = {}, input?: string): CliRun {
  const result = spawnSync(process.execPath, [CLI, ...args], {
    env: cliEnv(env),
    input,
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** For long-running commands (tail): the child, and its output so far. */
export function startCli(args: readonly string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [CLI, ...args], { env: cliEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise<number | null>((resolveExit) => child.once('exit', (code) => resolveExit(code)));
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}

export function waitFor(condition: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  return untilTrue(what, condition, timeoutMs);
}

export const tempDataDir = (label = 'cli') => mkdtempSync(join(tmpdir(), `ledger-${label}-`));

/** A clock that starts at `start` and moves `stepMs` each time the ledger reads it. */
export function steppingClock(start = '2025-03-01T09:00:00.000Z', stepMs = 1500) {
  let now = Date.parse(start);
  return {
    now: () => {
      const value = new Date(now);
      now += stepMs;
      return value;
    },
  };
}

let counter = 0;
/** Deterministic UUIDs, so two seedings of the same scenario store the same events. */
export function fixedId(seed: string): string {
  counter += 1;
  const hex = Buffer.from(`${seed}:${counter}`).toString('hex').padEnd(32, '0').slice(0, 32);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

export interface SeededLedger {
  dataDir: string;
  submit(
    ref: string,
    type: SubmittedEvent['type'],
    data: Record<string, unknown>,
    /** Who submits and under which trace or lease (default: actor `runtime-1`, none). */
    context?: Partial<Omit<SubmitContext, 'tenant' | 'operationRef'>>,
  ): Promise<SubmitAnswer | LedgerProblem>;
  close(): Promise<void>;
}

export async function openSeeder(
  dataDir: string,
  options: { start?: string; tenant?: string; anchorKey?: string } = {},
): Promise<SeededLedger> {
  const config = loadConfig({ LEDGER_DATA_DIR: dataDir });
  const store = SqliteEventStore.open({ file: join(dataDir, 'events.sqlite'), anchorKey: options.anchorKey });
  const ledger = new LedgerService(store, steppingClock(options.start), {
    envelopeLimits: config.envelopeLimits,
    defaultPolicy: config.defaultPolicy,
    maxConflictRetries: config.maxConflictRetries,
  });
  const tenant = options.tenant ?? 'default';
  return {
    dataDir,
    async submit(ref, type, data, context = {}) {
      try {
        return await ledger.submit(
          { actor: 'runtime-1', ...context, tenant, operationRef: ref },
          { events: [{ event_id: fixedId(ref), type, data: data as never }] },
        );
      } catch (error) {
        // A refusal is an outcome the scenarios expect (it is recorded); anything else is a bug.
        if (error instanceof LedgerProblem) return error;
        throw error;
      }
    },
    close: () => store.close(),
  };
}

export const unknownOutcome = (ref: string) => seedEnvelopes.outcomeUnknown(ref);

export const committed = (ref: string, evidence: string) =>
  seedEnvelopes.success(ref, evidence, '2025-03-01T09:00:30.000Z');

export const invalidInput = (ref: string) => seedEnvelopes.invalidRecipient(ref);

/**
 * The contract's incident: a write whose outcome is unknown, a retry the ledger refuses, a lookup that
 * finds the write committed, and a duplicate dispatch answered with the original success. Beside
 * it, a step of the same run that succeeds at once, and one in another run that needs new input.
 */
export async function seedIncident(seeder: SeededLedger): Promise<void> {
  const ref = 'run_81/step_4';
  await seeder.submit(ref, 'StepPlanned', {
    run_id: 'run_81',
    tool: 'create_invoice',
    side_effect: 'write',
    input_hash: 'sha256:9c1f',
    policy: { verification_tool: 'get_invoice_by_operation_ref' },
  });
  await seeder.submit(ref, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:9c1f' });
  await seeder.submit(ref, 'EnvelopeRecorded', { attempt: 1, envelope: unknownOutcome(ref) });
  await seeder.submit(ref, 'AttemptDispatched', { attempt: 2, input_hash: 'sha256:9c1f' });
  await seeder.submit(ref, 'VerificationRecorded', {
    outcome: 'found_committed',
    checked_at: '2025-03-01T09:00:20.000Z',
    evidence_ref: 'inv_123',
  });
  await seeder.submit(ref, 'AttemptDispatched', { attempt: 2, input_hash: 'sha256:9c1f' });

  const ok = 'run_81/step_5';
  await seeder.submit(ok, 'StepPlanned', {
    run_id: 'run_81',
    tool: 'send_email',
    side_effect: 'write',
    input_hash: 'sha256:aa01',
  });
  await seeder.submit(ok, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:aa01' });
  await seeder.submit(ok, 'EnvelopeRecorded', { attempt: 1, envelope: committed(ok, 'msg_77') });

  const fix = 'run_82/step_1';
  await seeder.submit(fix, 'StepPlanned', {
    run_id: 'run_82',
    tool: 'send_email',
    side_effect: 'write',
    input_hash: 'sha256:bb01',
  });
  await seeder.submit(fix, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:bb01' });
  await seeder.submit(fix, 'EnvelopeRecorded', { attempt: 1, envelope: invalidInput(fix) });
  await seeder.submit(fix, 'AttemptDispatched', { attempt: 2, input_hash: 'sha256:bb01' });
}
