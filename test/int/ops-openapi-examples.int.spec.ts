/**
 * Every submit example in the OpenAPI document is a body the built service accepts: each is sent,
 * after the examples it follows, to a fresh ledger over real HTTP and answers 200 with the state
 * its summary promises. The examples are read from the committed openapi.json, so what a reader
 * copies from /docs is what was run here.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { SUBMIT_EXAMPLES } from '../../src/openapi/submit-examples';
import { opPath, request } from '../support/http';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

const document = JSON.parse(readFileSync(resolve(__dirname, '../../openapi.json'), 'utf8'));
const published: Record<string, { value: unknown }> =
  document.paths['/v1/operations/{ref}/events'].post.requestBody.content['application/json'].examples;

/** The state each example leaves its operation in. */
const EXPECTED: Record<string, { status: string; next_action: string }> = {
  plan_write: { status: 'planned', next_action: 'dispatch' },
  dispatch: { status: 'dispatched', next_action: 'await_outcome' },
  write_socket_timeout: { status: 'verifying', next_action: 'verify_operation' },
  verified_committed: { status: 'succeeded', next_action: 'none' },
  invalid_recipient: { status: 'needs_input', next_action: 'correct_input' },
  lost_approval: { status: 'awaiting_approval', next_action: 'request_approval' },
  approval_granted: { status: 'retry_ready', next_action: 'dispatch' },
};

let ledger: LedgerProcess;

beforeAll(async () => {
  ledger = await startLedger();
});

afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
});

describe('the OpenAPI submit examples, run', () => {
  it('publishes every example this test runs, and nothing else', () => {
    expect(Object.keys(published).sort()).toEqual(Object.keys(SUBMIT_EXAMPLES).sort());
    expect(Object.keys(EXPECTED).sort()).toEqual(Object.keys(SUBMIT_EXAMPLES).sort());
  });

  it.each(Object.keys(SUBMIT_EXAMPLES))('%s is accepted and leaves the state it describes', async (name) => {
    const { ref, after } = SUBMIT_EXAMPLES[name];
    // On its own operation: the examples it follows first (resubmitting one is a no-op).
    const isolated = `${ref}_${name}`;
    const rebase = (body: unknown) => JSON.parse(JSON.stringify(body).split(`"${ref}"`).join(`"${isolated}"`));
    for (const earlier of after) {
      const answer = await request(
        ledger.baseUrl,
        'POST',
        `${opPath(isolated)}/events`,
        rebase(published[earlier].value),
      );
      expect(answer.status).toBe(200);
    }
    const answer = await request(ledger.baseUrl, 'POST', `${opPath(isolated)}/events`, rebase(published[name].value));
    expect({ status: answer.status, body: answer.status === 200 ? 'ok' : answer.body }).toEqual({
      status: 200,
      body: 'ok',
    });
    expect({ status: answer.body.state.status, next_action: answer.body.directive.next_action }).toEqual(
      EXPECTED[name],
    );
  });
});
