/**
 * A fixed scenario, run against the built service on a fresh data directory, printed as text: every
 * answer the ledger gave (writes, refusals, malformed bodies, reads), the log it wrote, and what the
 * CLI says of it. Two builds that print the same bytes answer the same; a refactor of how the ledger is
 * put together compares its output before and after (`node dist/tools/fixed-scenario.js > a.txt`).
 *
 * Only the wall clock differs between runs: instants, the durations measured from them and the hashes
 * that chain them are printed as placeholders; everything else (codes, directives, states, positions,
 * fields, messages) is printed as the ledger answered it.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const MAIN = resolve(__dirname, '../src/main.js');
const CLI = resolve(__dirname, '../src/cli/main.js');
const RUN = 'run_fixed';
const lines: string[] = [];

const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const HEX_DIGEST = /^(sha256:)?[0-9a-f]{64}$/;
/** Numbers that are durations measured against the wall clock (ages, lags, waits), not settings. */
const MEASURED =
  /(^|_)(age|lag|elapsed|wait|uptime|since)(_ms|_seconds)?$|^(age|lag)_|_age_ms$|_lag_ms$|^(mean|min|max|p\d+)_ms$/;

function masked(value: unknown, key = ''): unknown {
  if (typeof value === 'string') {
    if (INSTANT.test(value)) return '<instant>';
    if (HEX_DIGEST.test(value)) return '<digest>';
    return value.replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z/g, '<instant>');
  }
  if (typeof value === 'number' && MEASURED.test(key)) return '<measured>';
  if (Array.isArray(value)) return value.map((item) => masked(item, key));
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([name, item]) => [name, masked(item, name)]));
  return value;
}

const print = (heading: string, body: unknown) =>
  lines.push(`## ${heading}`, typeof body === 'string' ? body : JSON.stringify(masked(body), null, 2));

async function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.on('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => done(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

async function startService(dataDir: string) {
  const port = await freePort();
  const child = spawn(process.execPath, [MAIN], {
    env: { ...process.env, PORT: String(port), LEDGER_DATA_DIR: dataDir, LOG_LEVEL: 'warn' },
    stdio: 'ignore',
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 20_000; ;) {
    if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode}`);
    const answer = await fetch(`${baseUrl}/health/ready`).catch(() => undefined);
    if (answer?.ok) break;
    if (Date.now() > deadline) throw new Error('the service did not become ready in 20 s');
    await new Promise((wait) => setTimeout(wait, 50));
  }
  const stopped = new Promise((done) => child.once('exit', done));
  return { baseUrl, stop: () => (child.kill('SIGTERM'), stopped) };
}

async function exchange(baseUrl: string, label: string, method: string, path: string, body?: unknown) {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* printed as text */
  }
  print(`${label}: ${method} ${path} -> ${response.status} ${response.headers.get('content-type') ?? ''}`, parsed);
}

let eventCounter = 0;
/** Event ids are the scenario's own, so the log is the same in every run. */
const eventId = () => `00000000-0000-4000-8000-${String(++eventCounter).padStart(12, '0')}`;
const facts = (type: string, data: Record<string, unknown>) => ({ events: [{ event_id: eventId(), type, data }] });
const path = (step: string) => `/v1/operations/${encodeURIComponent(`${RUN}/${step}`)}`;
const failure = (ref: string, fields: Record<string, unknown>) => ({
  ok: false,
  operation_ref: ref,
  safe_details: {},
  agent_message: 'The tool did not complete.',
  user_message: 'That did not work yet.',
  ...fields,
});

async function writes(baseUrl: string) {
  const submit = (label: string, step: string, type: string, data: Record<string, unknown>) =>
    exchange(baseUrl, label, 'POST', `${path(step)}/events`, facts(type, data));
  const plan = (step: string, policy?: Record<string, unknown>) =>
    submit(`${step} planned`, step, 'StepPlanned', {
      run_id: RUN,
      tool: 'create_invoice',
      side_effect: 'write',
      input_hash: 'sha256:input-1',
      ...(policy ? { policy } : {}),
    });
  const dispatch = (step: string, attempt: number, input_hash = 'sha256:input-1') =>
    submit(`${step} dispatch ${attempt}`, step, 'AttemptDispatched', { attempt, input_hash });
  const record = (step: string, attempt: number, envelope: unknown) =>
    submit(`${step} envelope ${attempt}`, step, 'EnvelopeRecorded', { attempt, envelope });
  const ref = (step: string) => `${RUN}/${step}`;

  // An unknown outcome, verified not committed, then sent again and answered.
  await plan('unknown', { consistency_window_ms: 0 });
  await dispatch('unknown', 1);
  await record(
    'unknown',
    1,
    failure(ref('unknown'), {
      code: 'OUTCOME_UNKNOWN',
      category: 'dependency',
      commit_state: 'unknown',
      retry: { directive: 'never', max_attempts_remaining: 0 },
      next_action: 'verify_operation',
    }),
  );
  await dispatch('unknown', 2);
  await submit('unknown verified', 'unknown', 'VerificationRecorded', {
    outcome: 'not_found',
    checked_at: new Date().toISOString(),
  });
  await dispatch('unknown', 2);
  await record('unknown', 2, {
    ok: true,
    operation_ref: ref('unknown'),
    commit_state: 'committed',
    result: { invoice_id: 'inv_1' },
    verification: { checked_at: new Date().toISOString(), evidence_ref: 'inv_1' },
  });
  await dispatch('unknown', 3);

  // A validation failure: no unchanged retry, a changed input may run.
  await plan('invalid');
  await dispatch('invalid', 1);
  await record(
    'invalid',
    1,
    failure(ref('invalid'), {
      code: 'INVALID_RECIPIENT_ADDRESS',
      category: 'validation',
      commit_state: 'not_committed',
      retry: { directive: 'after_input_fix', max_attempts_remaining: 1 },
      next_action: 'correct_input',
      safe_details: { field: 'recipient_email' },
    }),
  );
  await dispatch('invalid', 2);
  await dispatch('invalid', 2, 'sha256:input-2');

  // Rate limited until a fixed instant far ahead: no retry before it.
  await plan('limited');
  await dispatch('limited', 1);
  await record(
    'limited',
    1,
    failure(ref('limited'), {
      code: 'RATE_LIMITED',
      category: 'dependency',
      commit_state: 'not_committed',
      retry: { directive: 'after_delay', not_before: '2999-01-01T00:00:00.000Z', max_attempts_remaining: 2 },
      next_action: 'wait_and_retry',
      safe_details: { retry_after: 30 },
    }),
  );
  await dispatch('limited', 2);

  // An approval asked for, refused dispatch without it, granted, dispatched.
  await plan('approval');
  await dispatch('approval', 1);
  await record(
    'approval',
    1,
    failure(ref('approval'), {
      code: 'MISSING_APPROVAL',
      category: 'authorization',
      commit_state: 'not_committed',
      retry: { directive: 'never', max_attempts_remaining: 1 },
      next_action: 'request_approval',
    }),
  );
  await dispatch('approval', 2);
  await submit('approval granted', 'approval', 'ApprovalRecorded', {
    decision: 'granted',
    approver: 'ops@example.com',
  });
  await dispatch('approval', 2);

  // A conflict the ledger escalates.
  await plan('paid');
  await dispatch('paid', 1);
  await record(
    'paid',
    1,
    failure(ref('paid'), {
      code: 'INVOICE_ALREADY_PAID',
      category: 'conflict',
      commit_state: 'not_committed',
      retry: { directive: 'never', max_attempts_remaining: 0 },
      next_action: 'escalate',
    }),
  );

  // Bodies that are not the documented shape: each a typed 400, nothing written.
  const malformed: Array<[string, unknown]> = [
    ['not JSON', '{"events": ['],
    ['no events', {}],
    ['empty events', { events: [] }],
    ['unknown fact type', { events: [{ event_id: eventId(), type: 'StepExploded', data: {} }] }],
    ['event id not a UUID', { events: [{ event_id: 'x', type: 'StepPlanned', data: {} }] }],
    ['extra property', { events: [{ event_id: eventId(), type: 'StepCancelled', data: { reason: 'r' }, more: 1 }] }],
    ['plan without tool', facts('StepPlanned', { run_id: RUN, side_effect: 'write', input_hash: 'sha256:x' })],
    [
      'plan with a bad side effect',
      facts('StepPlanned', { run_id: RUN, tool: 't', side_effect: 'w', input_hash: 'h' }),
    ],
    ['attempt zero', facts('AttemptDispatched', { attempt: 0, input_hash: 'sha256:input-1' })],
    ['envelope without commit_state', facts('EnvelopeRecorded', { attempt: 1, envelope: { ok: false, code: 'X' } })],
    ['verification with a bad outcome', facts('VerificationRecorded', { outcome: 'maybe', checked_at: 'soon' })],
    ['approval with a bad decision', facts('ApprovalRecorded', { decision: 'perhaps', approver: 'a' })],
    ['a success without operation_ref', facts('EnvelopeRecorded', { attempt: 1, envelope: { ok: true } })],
  ];
  for (const [label, body] of malformed) await exchange(baseUrl, label, 'POST', `${path('malformed')}/events`, body);
  await exchange(
    baseUrl,
    'bad operation_ref',
    'POST',
    '/v1/operations/not%20a%20ref/events',
    facts('StepCancelled', {}),
  );
}

async function reads(baseUrl: string) {
  for (const step of ['unknown', 'invalid', 'limited', 'approval', 'paid', 'malformed']) {
    await exchange(baseUrl, `${step} state`, 'GET', path(step));
    await exchange(baseUrl, `${step} events`, 'GET', `${path(step)}/events`);
    await exchange(baseUrl, `${step} evidence`, 'GET', `${path(step)}/evidence`);
  }
  await exchange(baseUrl, 'run', 'GET', `/v1/runs/${RUN}`);
  await exchange(baseUrl, 'runs', 'GET', '/v1/runs');
  await exchange(baseUrl, 'operations', 'GET', '/v1/operations');
  await exchange(baseUrl, 'triage', 'GET', '/v1/triage');
  await exchange(baseUrl, 'recovery', 'GET', '/v1/recovery');
  await exchange(baseUrl, 'work', 'GET', '/v1/work?wait_ms=0');
  await exchange(baseUrl, 'trust metrics', 'GET', '/v1/metrics/trust');
}

function cli(label: string, args: string[]) {
  const result = spawnSync(process.execPath, [CLI, ...args], {
    encoding: 'utf8',
    env: { ...process.env, NO_COLOR: '1' },
  });
  const text = (result.stdout + result.stderr)
    .replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z/g, '<instant>')
    .replace(/\b[0-9a-f]{64}\b/g, '<digest>')
    .replace(/(<instant>\s+)\d+ ms/g, '$1<measured> ms');
  print(`cli ${label} (exit ${result.status})`, text);
}

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), 'ledger-fixed-scenario-'));
  try {
    const service = await startService(dataDir);
    await writes(service.baseUrl);
    // The projections are eventually consistent: read once they have caught up with the log.
    await fetch(`${service.baseUrl}/v1/changes?wait_ms=0`);
    for (let tries = 0; tries < 100; tries++) {
      const ready = (await (await fetch(`${service.baseUrl}/health/ready`)).json()) as any;
      if (ready.info?.projections?.events_behind === 0) break;
      await new Promise((wait) => setTimeout(wait, 50));
    }
    await reads(service.baseUrl);
    await service.stop();
    for (const step of ['unknown', 'invalid', 'limited', 'approval', 'paid'])
      for (const command of ['replay', 'evidence'])
        cli(`${command} ${step}`, ['-d', dataDir, command, `${RUN}/${step}`]);
    cli('verify', ['-d', dataDir, 'verify']);
    cli('export', ['-d', dataDir, 'export']);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
  process.stdout.write(lines.join('\n') + '\n');
}

main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
