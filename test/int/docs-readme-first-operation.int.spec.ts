/**
 * The README's "A first operation" is a real run: its shell block is read from README.md, bash
 * expands it as a reader's shell would (variables, quoting), each curl is sent to the built service
 * over real HTTP, and what the comments promise is checked against the answers: every submit is
 * accepted, a second dispatch is refused with the code named, and the final GET has the fields
 * its comment lists. curl itself is not needed: test/support/doc-shell.ts records its arguments.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { asCurl, recordedCalls, type CurlCall } from '../support/doc-shell';
import { startLedger, type LedgerProcess } from '../support/ledger-in-process';

const README = readFileSync(resolve(__dirname, '../../README.md'), 'utf8');

/** The first sh block after the heading. */
function block(heading: string): string {
  const section = README.slice(README.indexOf(`## ${heading}`));
  const match = /```sh\n([\s\S]*?)```/.exec(section);
  if (!match) throw new Error(`no sh block under "## ${heading}"`);
  return match[1];
}

interface Curl extends CurlCall {
  comment: string;
}

/** The block's curl calls (nothing else in it runs), each with the comment on its line. */
function curlCalls(script: string): Curl[] {
  const comments = script
    .split('\n')
    .filter((line) => line.startsWith('curl '))
    .map((line) => /#\s*(.*)$/.exec(line)?.[1] ?? '');
  return recordedCalls(script)
    .filter((call) => call.command === 'curl')
    .map((call, index) => ({ ...asCurl(call), comment: comments[index] ?? '' }));
}

let ledger: LedgerProcess;

beforeAll(async () => {
  ledger = await startLedger();
});

afterAll(async () => {
  await ledger?.stop();
  ledger?.cleanup();
});

const send = async (call: Curl, baseUrl: string) => {
  const url = call.url.replace(/^(http:\/\/)?localhost:3000/, baseUrl);
  const response = await fetch(url, { method: call.method, headers: call.headers, body: call.body });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
};

describe('README: A first operation', () => {
  it('runs as written, and every comment in it is true', async () => {
    const calls = curlCalls(block('A first operation'));
    expect(calls.map((call) => call.method)).toEqual(['POST', 'POST', 'POST', 'GET']);

    for (const call of calls.filter((c) => c.method === 'POST')) {
      const answer = await send(call, ledger.baseUrl);
      expect({ status: answer.status, code: answer.body.code }).toEqual({ status: 200, code: undefined });
    }

    // "a second dispatch now answers 409 <CODE>"
    const promised = /a second dispatch now answers (\d{3}) ([A-Z_]+)/.exec(block('A first operation'));
    expect(promised).not.toBeNull();
    const second = await send(
      {
        ...calls[1],
        body: JSON.stringify({
          events: [
            { event_id: randomUUID(), type: 'AttemptDispatched', data: { attempt: 2, input_hash: 'sha256:9c1f' } },
          ],
        }),
      },
      ledger.baseUrl,
    );
    expect({ status: second.status, code: second.body.code }).toEqual({
      status: Number(promised![1]),
      code: promised![2],
    });

    // The final GET's comment: "key: value, key: value (...)".
    const get = calls[3];
    const state = await send(get, ledger.baseUrl);
    expect(state.status).toBe(200);
    const fields = get.comment
      .replace(/\(.*\)/, '')
      .split(',')
      .map((pair) => pair.split(':').map((part) => part.trim()));
    expect(fields.length).toBeGreaterThan(0);
    for (const [key, value] of fields) expect({ [key]: state.body[key] }).toEqual({ [key]: value });
    if (/no directive/.test(get.comment)) expect(state.body.directive).toBeUndefined();
  });
});
