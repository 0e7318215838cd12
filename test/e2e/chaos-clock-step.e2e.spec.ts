/**
 * The served process with its wall clock stepped by an hour while it runs, forward and back, by
 * Debian's libfaketime (the monotonic clock left alone, as a real `date -s` or NTP step leaves it):
 * no dispatch is granted early, no not_found is accepted inside its window as measured in elapsed
 * time, recorded_at never decreases in a stream, and nothing in doubt leaves /v1/recovery
 * (docs/reliability.md, "A stepped clock"). Where libfaketime is not installed this suite says so
 * and skips; CI installs it and sets LEDGER_REQUIRE_FAKETIME=1, so there it cannot be skipped.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';
import { submitFact } from '../support/http';

const LIBFAKETIME = [
  '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1',
  '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1',
].find((file) => existsSync(file));
const HOUR_AHEAD = '+1h';
const HOUR_BEHIND = '-1h';

if (!LIBFAKETIME) {
  if (process.env.LEDGER_REQUIRE_FAKETIME === '1')
    throw new Error('LEDGER_REQUIRE_FAKETIME=1 but libfaketime is not installed (apt-get install faketime)');
  console.log('clock-step tests skipped: libfaketime is not installed (apt-get install faketime to run them)');
}
const describeWithFaketime = LIBFAKETIME ? describe : describe.skip;

interface Answer {
  status: number;
  body: {
    code?: string;
    state?: { status?: string };
    items?: Array<{ operation_ref: string }>;
    events?: Array<{ recorded_at: string }>;
  };
}

async function send(ledger: LedgerProcess, method: string, path: string, body?: unknown): Promise<Answer> {
  const response = await fetch(`${ledger.baseUrl}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Answer['body'] };
}

const submit = (ledger: LedgerProcess, ref: string, type: string, data: Record<string, unknown>) =>
  submitFact(ledger.baseUrl, ref, type, data) as Promise<Answer>;

describeWithFaketime('the served process under a wall clock stepped by an hour', () => {
  let dir: string;
  let clockFile: string;
  let ledger: LedgerProcess;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-faketime-'));
    clockFile = join(dir, 'faketime');
    writeFileSync(clockFile, '+0');
    ledger = await startLedger({
      env: {
        LD_PRELOAD: LIBFAKETIME as string,
        FAKETIME_TIMESTAMP_FILE: clockFile,
        FAKETIME_NO_CACHE: '1',
        FAKETIME_DONT_FAKE_MONOTONIC: '1',
      },
    });
  });

  afterEach(async () => {
    await ledger?.stop();
    ledger?.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  async function inDoubt(ref: string, windowMs: number) {
    const plan = await submit(ledger, ref, 'StepPlanned', {
      run_id: 'run_clock',
      tool: 'create_invoice',
      side_effect: 'write',
      input_hash: 'sha256:clock',
      policy: { consistency_window_ms: windowMs, max_attempts: 5 },
    });
    expect(plan.status).toBe(200);
    expect((await submit(ledger, ref, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:clock' })).status).toBe(
      200,
    );
    const envelope = await submit(ledger, ref, 'EnvelopeRecorded', {
      attempt: 1,
      envelope: seedEnvelopes.outcomeUnknown(ref),
    });
    expect(envelope.body.state?.status).toBe('verifying');
  }

  async function recordedAtNeverDecreases(ref: string) {
    const events = (await send(ledger, 'GET', `/v1/operations/${encodeURIComponent(ref)}/events`)).body.events ?? [];
    const times = events.map((event) => Date.parse(event.recorded_at));
    for (let i = 1; i < times.length; i++) expect(times[i]).toBeGreaterThanOrEqual(times[i - 1]);
  }

  it('forward: a not_found one second after an unknown outcome is refused, no second dispatch, a not_before holds', async () => {
    await inDoubt('clock/forward', 30_000);
    const limited = 'clock/limited';
    await submit(ledger, limited, 'StepPlanned', {
      run_id: 'run_clock',
      tool: 'create_invoice',
      side_effect: 'write',
      input_hash: 'sha256:clock',
    });
    await submit(ledger, limited, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:clock' });
    const notBefore = new Date(Date.now() + 10 * 60_000).toISOString();
    await submit(ledger, limited, 'EnvelopeRecorded', {
      attempt: 1,
      envelope: seedEnvelopes.rateLimited(limited, notBefore),
    });

    writeFileSync(clockFile, HOUR_AHEAD);
    await new Promise((resolve) => setTimeout(resolve, 1_000));

    const notFound = await submit(ledger, 'clock/forward', 'VerificationRecorded', {
      outcome: 'not_found',
      checked_at: new Date().toISOString(),
    });
    expect(notFound.status).toBe(409);
    expect(notFound.body.code).toBe('VERIFICATION_PREMATURE');
    const again = await submit(ledger, 'clock/forward', 'AttemptDispatched', {
      attempt: 2,
      input_hash: 'sha256:clock',
    });
    expect(again.body.code).toBe('VERIFY_BEFORE_RETRY');
    const early = await submit(ledger, limited, 'AttemptDispatched', { attempt: 2, input_hash: 'sha256:clock' });
    expect(early.status).toBe(409);
    expect(early.body.code).toBe('RETRY_NOT_BEFORE');

    const recovery = await send(ledger, 'GET', '/v1/recovery?older_than_ms=0');
    expect(recovery.body.items?.map((item) => item.operation_ref)).toContain('clock/forward');
    await recordedAtNeverDecreases('clock/forward');
    await recordedAtNeverDecreases(limited);

    const ready = (await send(ledger, 'GET', '/health/ready')).body as unknown as {
      details: { clock: { steps_detected: number; offset_ms: number } };
    };
    expect(ready.details.clock.steps_detected).toBeGreaterThanOrEqual(1);
    expect(ready.details.clock.offset_ms).toBeGreaterThan(3_000_000);
    const metrics = await (await fetch(`${ledger.baseUrl}/metrics`)).text();
    expect(metrics).toMatch(/^ledger_clock_steps_detected [1-9]/m);
  });

  it('back: a window ends when its time has elapsed, recorded_at never decreases, every operation in doubt stays listed', async () => {
    const refs = ['clock/back-1', 'clock/back-2', 'clock/back-3', 'clock/back-4'];
    for (const ref of refs) await inDoubt(ref, 1_500);

    writeFileSync(clockFile, HOUR_BEHIND);
    const listed = await send(ledger, 'GET', '/v1/recovery?older_than_ms=0');
    expect(listed.body.items?.map((item) => item.operation_ref).sort()).toEqual(refs);

    await new Promise((resolve) => setTimeout(resolve, 1_700));
    const notFound = await submit(ledger, refs[0], 'VerificationRecorded', {
      outcome: 'not_found',
      checked_at: new Date().toISOString(),
    });
    expect(notFound.status).toBe(200);
    expect(notFound.body.state?.status).toBe('retry_ready');
    for (const ref of refs) await recordedAtNeverDecreases(ref);
    const stillInDoubt = await send(ledger, 'GET', '/v1/recovery?older_than_ms=0');
    expect(stillInDoubt.body.items?.map((item) => item.operation_ref).sort()).toEqual(refs.slice(1));
  });
});
