/**
 * The README's "A first operation" is a real run: its shell block is read from README.md, bash
 * expands it as a reader's shell would (variables, quoting), each curl is sent to the built service
 * over real HTTP, and what the comments promise is checked against the answers: every submit is
 * accepted, a second dispatch is refused with the code named, and the final GET has the fields
 * its comment lists. curl itself is not needed: a shell function records its arguments instead.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { startLedger, type LedgerProcess } from '../support/ledger-process';

const README = readFileSync(resolve(__dirname, '../../README.md'), 'utf8');

/** The first sh block after the heading. */
function block(heading: string): string {
  const section = README.slice(README.indexOf(`## ${heading}`));
  const match = /```sh\n([\s\S]*?)```/.exec(section);
  if (!match) throw new Error(`no sh block under "## ${heading}"`);
  return match[1];
}

interface Curl {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
  comment: string;
}

/** Runs the block in bash with curl replaced by a recorder, and answers each call's arguments. */
function curlCalls(script: string): Curl[] {
  const recorder = `curl() { printf '%s\\0' "$@"; printf '\\n--end--\\0'; }\n`;
  const output = execFileSync('bash', ['-c', recorder + script], { encoding: 'utf8' });
  const calls = output.split('\n--end--\0').filter((chunk) => chunk.length > 0);
  const comments = script.split('\n').filter((line) => line.startsWith('curl ')).map((line) => /#\s*(.*)$/.exec(line)?.[1] ?? '');
  return calls.map((chunk, index) => {
    const args = chunk.split('\0').filter((arg, i, all) => i < all.length - 1 || arg !== '');
    const call: Curl = { method: 'GET', url: '', headers: {}, comment: comments[index] ?? '' };
    for (let i = 0; i < args.length; i++) {
      const arg = args[i];
      if (arg === '-s') continue;
      if (arg.startsWith('-X')) call.method = arg.length > 2 ? arg.slice(2) : args[++i];
      else if (arg === '-H') {
        const [name, ...value] = args[++i].split(':');
        call.headers[name.trim()] = value.join(':').trim();
      } else if (arg === '-d') call.body = args[++i];
      else call.url = arg;
    }
    return call;
  });
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

describe("README: A first operation", () => {
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
        body: JSON.stringify({ events: [{ event_id: randomUUID(), type: 'AttemptDispatched', data: { attempt: 2, input_hash: 'sha256:9c1f' } }] }),
      },
      ledger.baseUrl,
    );
    expect({ status: second.status, code: second.body.code }).toEqual({ status: Number(promised![1]), code: promised![2] });

    // The final GET's comment: "key: value, key: value (...)".
    const get = calls[3];
    const state = await send(get, ledger.baseUrl);
    expect(state.status).toBe(200);
    const fields = get.comment.replace(/\(.*\)/, '').split(',').map((pair) => pair.split(':').map((part) => part.trim()));
    expect(fields.length).toBeGreaterThan(0);
    for (const [key, value] of fields) expect({ [key]: state.body[key] }).toEqual({ [key]: value });
    if (/no directive/.test(get.comment)) expect(state.body.directive).toBeUndefined();
  });
});
