/**
 * Secrets never leave a trace (docs/contract.md §2, §8): every shape of the credential corpus
 * (test/support/secret-corpus.ts) is placed in every free-form field — envelope messages and safe
 * details, a success's result and evidence, a verification's evidence and result, an approval's
 * approver and reason, as a value, as a JSON key and under a secret key name — and in every
 * identifier field — operation_ref, run_id, tool, input_hash, the policy's and the envelope's
 * verification_tool, envelope.code and operation_ref, tracestate — and in refused submits, a field
 * name and a query string. Then no file of the data directory (the log, its WAL, the read models),
 * no answer of the run and no log line (at trace level) may hold any of it.
 */
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { opPath } from '../support/http';
import { SECRET_CORPUS } from '../support/secret-corpus';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

const SECRETS = SECRET_CORPUS;

const RUNTIME_KEY = 'secrets-runtime-key-4e8a2c6f0b1d3957';
const APPROVER_KEY = 'secrets-approver-key-9c2e4a6b8d0f1357';
const ADMIN_KEY = 'secrets-admin-key-7d1f3b5e9a0c2468e';
const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

interface Answer {
  status: number;
  text: string;
  body: any;
  headers: string;
}

const plan = (tool = 'create_invoice') => ({
  run_id: 'run_secrets',
  tool,
  side_effect: 'write',
  input_hash: 'sha256:in-1',
});
const unknownOutcome = (ref: string, secret: string) => ({
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
});

describe('credentials in facts leave no trace', () => {
  let ledger: LedgerProcess;
  const answers: Answer[] = [];
  const identifierAnswers: Array<{ what: string; field: string; status: number; code?: string }> = [];
  let position = 0;

  async function call(
    method: string,
    path: string,
    key: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<Answer> {
    const response = await fetch(`${ledger.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    let parsed: any;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const answer = { status: response.status, text, body: parsed, headers: JSON.stringify([...response.headers]) };
    answers.push(answer);
    if (typeof parsed?.position === 'number') position = Math.max(position, parsed.position);
    return answer;
  }
  const post = (
    ref: string,
    type: string,
    data: Record<string, unknown>,
    key = RUNTIME_KEY,
    headers: Record<string, string> = {},
  ) => call('POST', `${opPath(ref)}/events`, key, { events: [{ event_id: randomUUID(), type, data }] }, headers);
  const submit = async (
    ref: string,
    type: string,
    data: Record<string, unknown>,
    expected = 200,
    key = RUNTIME_KEY,
  ) => {
    const answer = await post(ref, type, data, key);
    expect({ ref, type, status: answer.status, body: answer.status === expected ? undefined : answer.body }).toEqual({
      ref,
      type,
      status: expected,
      body: undefined,
    });
    return answer;
  };

  beforeAll(async () => {
    ledger = await startLedger({
      env: {
        LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme,${APPROVER_KEY}:approver:acme,${ADMIN_KEY}:admin:acme`,
        LEDGER_RATE_LIMIT_PER_MINUTE: '10000000',
        LOG_LEVEL: 'trace',
      },
    });
    for (const [index, [what, secret]] of SECRETS.entries()) {
      // ---- free-form fields: stored, redacted ----------------------------------------------------
      const ref = `run_secrets/step_${index}`;
      await submit(ref, 'StepPlanned', plan());
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
      await submit(ref, 'EnvelopeRecorded', { attempt: 2, envelope: unknownOutcome(ref, secret) });
      // The lookup's evidence and result carry it too: as a value, a key, and under a secret's name.
      await submit(ref, 'VerificationRecorded', {
        outcome: 'found_committed',
        checked_at: new Date().toISOString(),
        evidence_ref: secret.slice(0, 200),
        result: {
          invoice: 'inv_1',
          raw_response: { headers: [secret], note: `seen ${secret}` },
          [secret.slice(0, 200)]: 'as a key',
          client_secret: secret,
        },
      });

      // A tool's own success, with the credential in its result and evidence.
      const successRef = `run_secrets/success_${index}`;
      await submit(successRef, 'StepPlanned', plan());
      await submit(successRef, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:in-1' });
      await submit(successRef, 'EnvelopeRecorded', {
        attempt: 1,
        envelope: {
          ok: true,
          operation_ref: successRef,
          commit_state: 'committed',
          result: {
            invoice_id: 'inv_2',
            echo: secret,
            nested: [{ authorization: secret }],
            card_number: 4111111111111111,
          },
          verification: { checked_at: new Date().toISOString(), evidence_ref: secret.slice(0, 200) },
        },
      });

      // An approval whose approver and reason quote it.
      const approvalRef = `run_secrets/approval_${index}`;
      await submit(approvalRef, 'StepPlanned', plan('wire_money'));
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
      await submit(
        approvalRef,
        'ApprovalRecorded',
        { decision: 'granted', approver: `ops (${secret})`.slice(0, 200), reason: `approved, token was ${secret}` },
        200,
        APPROVER_KEY,
      );

      // Refused submits must not echo it either: an envelope that breaks a rule, an unknown field,
      // an unknown field named like the credential.
      await submit(
        ref,
        'EnvelopeRecorded',
        {
          attempt: 3,
          envelope: { ok: false, code: 'X', agent_message: secret, user_message: secret, operation_ref: 'elsewhere' },
        },
        422,
      );
      await submit(
        ref,
        'ApprovalRecorded',
        { decision: 'granted', approver: 'ops', reason: secret, extra_field: secret },
        400,
        APPROVER_KEY,
      );
      await submit(
        ref,
        'ApprovalRecorded',
        { decision: 'granted', approver: 'ops', [secret.slice(0, 200)]: 1 },
        400,
        APPROVER_KEY,
      );

      // ---- identifier fields: refused whole, never stored ------------------------------------------
      const idRef = `run_secrets/ids_${index}`;
      await submit(idRef, 'StepPlanned', plan());
      const attempts: Array<[string, () => Promise<Answer>]> = [
        ['operation_ref', () => post(secret, 'StepPlanned', plan())],
        ['run_id', () => post(`run_secrets/run_${index}`, 'StepPlanned', { ...plan(), run_id: secret })],
        ['tool', () => post(`run_secrets/tool_${index}`, 'StepPlanned', plan(secret))],
        ['input_hash', () => post(`run_secrets/hash_${index}`, 'StepPlanned', { ...plan(), input_hash: secret })],
        [
          'policy.verification_tool',
          () =>
            post(`run_secrets/policy_${index}`, 'StepPlanned', { ...plan(), policy: { verification_tool: secret } }),
        ],
        ['dispatch input_hash', () => post(idRef, 'AttemptDispatched', { attempt: 1, input_hash: secret })],
        [
          'envelope.code',
          () =>
            post(idRef, 'EnvelopeRecorded', { attempt: 1, envelope: { ...unknownOutcome(idRef, 'x'), code: secret } }),
        ],
        [
          'envelope.operation_ref',
          () =>
            post(idRef, 'EnvelopeRecorded', {
              attempt: 1,
              envelope: { ...unknownOutcome(idRef, 'x'), operation_ref: secret },
            }),
        ],
        [
          'envelope.safe_details.verification_tool',
          () =>
            post(idRef, 'EnvelopeRecorded', {
              attempt: 1,
              envelope: { ...unknownOutcome(idRef, 'x'), safe_details: { verification_tool: secret } },
            }),
        ],
      ];
      // Header values cannot hold a line break; the corpus's multi-line keys go everywhere else.
      if (!/[\r\n]/.test(secret)) {
        attempts.push([
          'tracestate',
          () =>
            post(`run_secrets/trace_${index}`, 'StepPlanned', plan(), RUNTIME_KEY, {
              traceparent: TRACEPARENT,
              tracestate: `congo=${secret}`,
            }),
        ]);
      }
      for (const [field, attempt] of attempts) {
        const answer = await attempt();
        identifierAnswers.push({ what, field, status: answer.status, code: answer.body?.code });
      }

      // A key in a query string, on a read and on a refused write.
      await call('GET', `/v1/recovery?api_key=${encodeURIComponent(secret)}`, RUNTIME_KEY);
      await call(
        'POST',
        `${opPath('run_secrets/q')}/events?token=${encodeURIComponent(secret)}`,
        'not-a-key-at-all-000000',
        { events: [] },
      );
    }
    // A card number sent as a JSON number, in a verification's result.
    const cardRef = 'run_secrets/card_number';
    await submit(cardRef, 'StepPlanned', plan());
    await submit(cardRef, 'AttemptDispatched', { attempt: 1, input_hash: 'sha256:in-1' });
    await submit(cardRef, 'EnvelopeRecorded', { attempt: 1, envelope: unknownOutcome(cardRef, 'no secret here') });
    await submit(cardRef, 'VerificationRecorded', {
      outcome: 'found_committed',
      checked_at: new Date().toISOString(),
      result: { charged: 5105105105105100, amount: 1250 },
    });

    // Every reader's view, once the projections have applied all of it.
    await call('GET', `/v1/runs/run_secrets?wait_for_position=${position}&wait_timeout_ms=20000`, RUNTIME_KEY);
    for (const index of SECRETS.keys()) {
      for (const ref of [
        `run_secrets/step_${index}`,
        `run_secrets/success_${index}`,
        `run_secrets/approval_${index}`,
        `run_secrets/ids_${index}`,
      ]) {
        await call('GET', opPath(ref), RUNTIME_KEY);
        await call('GET', `${opPath(ref)}/events`, RUNTIME_KEY);
        await call('GET', `${opPath(ref)}/events?as_of_revision=4`, RUNTIME_KEY);
        await call('GET', `${opPath(ref)}/evidence`, RUNTIME_KEY);
      }
    }
    await call('GET', `${opPath(cardRef)}/events`, RUNTIME_KEY);
    for (const path of ['/v1/recovery', '/v1/metrics/trust', '/v1/operations?limit=500', '/metrics'])
      await call('GET', path, path === '/metrics' ? ADMIN_KEY : RUNTIME_KEY);
    await call('GET', '/v1/admin/export', ADMIN_KEY);
  }, 300_000);

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

  /** Every byte of every file in the data directory (the log, its WAL and shared memory, read models). */
  function dataFiles(): string {
    return readdirSync(ledger.dataDir, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) =>
        readFileSync(join(entry.parentPath ?? (entry as unknown as { path: string }).path, entry.name)).toString(
          'latin1',
        ),
      )
      .join('\n');
  }

  test('the facts were stored, with their redactions recorded (the check below has something to look at)', () => {
    const stored = table();
    const kinds = [
      'bearer_token',
      'basic_auth',
      'api_key',
      'jwt',
      'private_key',
      'aws_access_key',
      'detected_github',
      'detected_slack',
      'google_api_key',
      'sendgrid_key',
      'basic_auth_url',
      'named_secret',
      'card_number',
      'detected_npm',
      'detected_shopify',
    ];
    // Booleans, not toContain: on failure the message would print the whole table.
    expect(kinds.filter((kind) => !stored.includes(`[REDACTED:${kind}]`))).toEqual([]);
    const db = new Database(join(ledger.dataDir, 'events.sqlite'), { readonly: true, fileMustExist: true });
    try {
      const approvals = db.prepare("SELECT data FROM events WHERE type = 'ApprovalRecorded'").all() as Array<{
        data: string;
      }>;
      expect(approvals.length).toBe(SECRETS.length);
      const envelopes = db.prepare("SELECT data FROM events WHERE type = 'EnvelopeRecorded'").all() as Array<{
        data: string;
      }>;
      expect(envelopes.every((row) => Array.isArray(JSON.parse(row.data).redactions))).toBe(true);
      // The card sent as a JSON number was redacted, and the redaction recorded by path.
      const card = db
        .prepare(
          "SELECT data FROM events WHERE stream = 'op-acme:run_secrets/card_number' AND type = 'VerificationRecorded'",
        )
        .get() as { data: string };
      expect(JSON.parse(card.data)).toMatchObject({
        result: { charged: '[REDACTED:card_number]', amount: 1250 },
        redactions: [{ path: 'result.charged', kind: 'card_number' }],
      });
    } finally {
      db.close();
    }
    expect(answers.filter((answer) => answer.status === 200).length).toBeGreaterThan(SECRETS.length * 14);
  });

  test('every identifier holding a credential was refused (422 SECRET_IN_IDENTIFIER, or 400 where the grammar already refuses it)', () => {
    // A malformed tracestate is dropped (W3C), the fact kept without it: the data files show none of it (below).
    const accepted = identifierAnswers
      .filter(
        (answer) =>
          answer.status !== 400 && answer.status !== 422 && !(answer.field === 'tracestate' && answer.status === 200),
      )
      .map((a) => `${a.what} in ${a.field}: ${a.status}`);
    expect(accepted).toEqual([]);
    const byDetector = identifierAnswers.filter((answer) => answer.code === 'SECRET_IN_IDENTIFIER');
    // The grammar alone does not do it: many credentials are valid identifiers, caught by the detector.
    expect(byDetector.length).toBeGreaterThan(SECRETS.length);
    expect(new Set(byDetector.map((answer) => answer.field.replace(/^dispatch /, ''))).size).toBeGreaterThanOrEqual(8);
  });

  test.each(SECRETS)('%s: in no file of the data directory, no answer and no log line', (_what, _text, fragment) => {
    expect(table().includes(fragment)).toBe(false);
    expect(dataFiles().includes(fragment)).toBe(false);
    const leaking = answers.filter(
      (answer) =>
        answer.text.includes(fragment) ||
        answer.headers.includes(fragment) ||
        answer.text.includes(encodeURIComponent(fragment)),
    );
    expect(leaking.map((answer) => `${answer.status} ${answer.text.slice(0, 200)}`)).toEqual([]);
    // Logs escape newlines and quotes as JSON does; the fragments have neither.
    expect(ledger.output().includes(fragment)).toBe(false);
    expect(ledger.output().includes(encodeURIComponent(fragment))).toBe(false);
  });

  test('the log was written at all (at trace level), so its silence about secrets means something', () => {
    expect(ledger.output()).toMatch(/"msg":"POST \/v1\/operations\/:ref\/events 200/);
    expect(ledger.output()).toMatch(/"msg":"GET \/v1\/recovery 200/);
  });
});
