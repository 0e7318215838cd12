/**
 * Secrets never leave a trace (SPEC §2, §8; issue 6): real-looking credentials placed where a tool
 * or an approver may put them — envelope messages and safe details, a verification's evidence and
 * result, an approval's approver and reason — and in refused submits, must appear in no stored
 * event (the raw table, every column), no answer (every response of the run, every read endpoint)
 * and no log line (the server's stdout and stderr, at the most verbose level).
 */
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { opPath } from '../support/http';
import { SECRET_CORPUS } from '../support/secret-corpus';
import { startLedger, type LedgerProcess } from '../support/ledger-process';

const SECRETS = SECRET_CORPUS;

const RUNTIME_KEY = 'secrets-runtime-key-4e8a2c6f0b1d3957';
const ADMIN_KEY = 'secrets-admin-key-7d1f3b5e9a0c2468e';

interface Answer {
  status: number;
  text: string;
  body: any;
}

describe('credentials in facts leave no trace', () => {
  let ledger: LedgerProcess;
  const answers: Answer[] = [];
  let position = 0;

  async function call(method: string, path: string, key: string, body?: unknown): Promise<Answer> {
    const response = await fetch(`${ledger.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    let parsed: any;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const answer = { status: response.status, text, body: parsed };
    answers.push(answer);
    if (typeof parsed?.position === 'number') position = Math.max(position, parsed.position);
    return answer;
  }
  const submit = async (ref: string, type: string, data: Record<string, unknown>, expected = 200) => {
    const answer = await call('POST', `${opPath(ref)}/events`, RUNTIME_KEY, { events: [{ event_id: randomUUID(), type, data }] });
    expect({ ref, type, status: answer.status, body: answer.status === expected ? undefined : answer.body }).toEqual({ ref, type, status: expected, body: undefined });
    return answer;
  };

  beforeAll(async () => {
    ledger = await startLedger({
      env: { LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${ADMIN_KEY}:admin:acme`, LEDGER_RATE_LIMIT_PER_MINUTE: '10000000', LOG_LEVEL: 'trace' },
    });
    for (const [index, [, secret]] of SECRETS.entries()) {
      const ref = `run_secrets/step_${index}`;
      await submit(ref, 'StepPlanned', { run_id: 'run_secrets', tool: 'create_invoice', side_effect: 'write', input_hash: 'sha256:in-1' });
      await submit(ref, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:in-1' });
      // The tool echoes the credential back in its messages and details.
      await submit(ref, 'EnvelopeRecorded', {
        attempt: 1,
        envelope: {
          ok: false,
          code: 'INVALID_RECIPIENT_ADDRESS',
          category: 'validation',
          commit_state: 'not_committed',
          retry: { directive: 'after_input_fix', max_attempts_remaining: 2 },
          next_action: 'correct_input',
          operation_ref: ref,
          safe_details: { field: secret.slice(0, 200) },
          agent_message: `The recipient was refused (${secret}).`,
          user_message: secret,
        },
      });
      await submit(ref, 'AttemptDispatched', { attempt: 2, input_hash: 'sha256:in-2' });
      await submit(ref, 'EnvelopeRecorded', {
        attempt: 2,
        envelope: {
          ok: false,
          code: 'OUTCOME_UNKNOWN',
          category: 'dependency',
          commit_state: 'unknown',
          retry: { directive: 'never', max_attempts_remaining: 0 },
          next_action: 'verify_operation',
          operation_ref: ref,
          safe_details: { verification_tool: 'get_invoice_by_operation_ref' },
          agent_message: `Timed out after sending ${secret}`,
          user_message: 'Checking before anything is sent again.',
        },
      });
      // The lookup's evidence and result carry it too.
      await submit(ref, 'VerificationRecorded', {
        outcome: 'found_committed',
        checked_at: new Date().toISOString(),
        evidence_ref: secret.slice(0, 200),
        result: { invoice: 'inv_1', raw_response: { headers: [secret], note: `seen ${secret}` } },
      });

      // An approval whose approver and reason quote it.
      const approvalRef = `run_secrets/approval_${index}`;
      await submit(approvalRef, 'StepPlanned', { run_id: 'run_secrets', tool: 'wire_money', side_effect: 'write', input_hash: 'sha256:in-1' });
      await submit(approvalRef, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:in-1' });
      await submit(approvalRef, 'EnvelopeRecorded', {
        attempt: 1,
        envelope: {
          ok: false,
          code: 'MISSING_APPROVAL',
          category: 'authorization',
          commit_state: 'not_committed',
          retry: { directive: 'never', max_attempts_remaining: 1 },
          next_action: 'request_approval',
          operation_ref: approvalRef,
          safe_details: {},
          agent_message: `Needs approval; caller sent ${secret}`,
          user_message: 'This needs an approval first.',
        },
      });
      await submit(approvalRef, 'ApprovalRecorded', { decision: 'granted', approver: `ops (${secret})`.slice(0, 200), reason: `approved, token was ${secret}` });

      // Refused submits must not echo it either: an envelope that breaks a rule, an unknown field.
      await submit(ref, 'EnvelopeRecorded', { attempt: 3, envelope: { ok: false, code: 'X', agent_message: secret, user_message: secret, operation_ref: 'elsewhere' } }, 422);
      await submit(ref, 'ApprovalRecorded', { decision: 'granted', approver: 'ops', reason: secret, extra_field: secret }, 400);
    }
    // Every reader's view, once the projections have applied all of it.
    await call('GET', `/v1/runs/run_secrets?wait_for_position=${position}&wait_timeout_ms=20000`, RUNTIME_KEY);
    for (const index of SECRETS.keys()) {
      for (const ref of [`run_secrets/step_${index}`, `run_secrets/approval_${index}`]) {
        await call('GET', opPath(ref), RUNTIME_KEY);
        await call('GET', `${opPath(ref)}/events`, RUNTIME_KEY);
        await call('GET', `${opPath(ref)}/events?as_of_revision=4`, RUNTIME_KEY);
        await call('GET', `${opPath(ref)}/evidence`, RUNTIME_KEY);
      }
    }
    for (const path of ['/v1/recovery', '/v1/metrics/trust', '/v1/operations', '/metrics']) await call('GET', path, RUNTIME_KEY);
    await call('GET', '/v1/admin/export', ADMIN_KEY);
  }, 120_000);

  afterAll(async () => {
    await ledger?.stop();
    ledger?.cleanup();
  });

  function table(): string {
    const db = new Database(join(ledger.dataDir, 'events.sqlite'), { readonly: true, fileMustExist: true });
    try {
      return JSON.stringify(db.prepare('SELECT * FROM events ORDER BY position').all());
    } finally {
      db.close();
    }
  }

  test('the facts were stored, with their redactions recorded (the check below has something to look at)', () => {
    const stored = table();
    const kinds = ['bearer_token', 'api_key', 'jwt', 'private_key', 'aws_access_key', 'github_token', 'slack_token', 'basic_auth_url', 'card_number'];
    // Booleans, not toContain: on failure the message would print the whole table.
    expect(kinds.filter((kind) => !stored.includes(`[REDACTED:${kind}]`))).toEqual([]);
    const db = new Database(join(ledger.dataDir, 'events.sqlite'), { readonly: true, fileMustExist: true });
    try {
      const approvals = db.prepare("SELECT data FROM events WHERE type = 'ApprovalRecorded'").all() as Array<{ data: string }>;
      expect(approvals.length).toBe(SECRETS.length);
      const envelopes = db.prepare("SELECT data FROM events WHERE type = 'EnvelopeRecorded'").all() as Array<{ data: string }>;
      expect(envelopes.every((row) => Array.isArray(JSON.parse(row.data).redactions))).toBe(true);
    } finally {
      db.close();
    }
    expect(answers.filter((answer) => answer.status === 200).length).toBeGreaterThan(SECRETS.length * 10);
  });

  test.each(SECRETS)('%s: in no stored event, no answer and no log line', (_what, _text, fragment) => {
    expect(table().includes(fragment)).toBe(false);
    expect(answers.filter((answer) => answer.text.includes(fragment)).map((answer) => `${answer.status} ${answer.text.slice(0, 200)}`)).toEqual([]);
    // Logs escape newlines and quotes as JSON does; the fragments have neither.
    expect(ledger.output().includes(fragment)).toBe(false);
  });

  test('the log was written at all (at trace level), so its silence about secrets means something', () => {
    expect(ledger.output()).toMatch(/"msg":"POST \/v1\/operations\/[^"]+\/events 200/);
  });
});
