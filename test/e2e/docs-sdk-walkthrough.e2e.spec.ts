/**
 * docs/sdk.md's walkthrough is a real run: its shell blocks are read from the document, the
 * example worker runs as a real process with the arguments written there, against the built
 * ledger and the example invoice provider, and its output must be the output printed under each
 * block (instants aside). Two waits are made exact instead of timed: the worker is killed once its
 * request reached the provider (the document's `sleep 0.8`), and the second life starts once the
 * provider holds the invoice (the document's `sleep 3`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { startInvoiceProvider, type InvoiceProvider } from '../../examples/invoice-provider/invoice-provider';
import { asCurl, fencedBlocks, recordedCalls, type ShellCall } from '../support/doc-shell';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { untilTrue as until } from '../support/until';

const ROOT = resolve(__dirname, '../..');
const SDK_DOC = readFileSync(resolve(ROOT, 'docs/sdk.md'), 'utf8');
const WORKER = 'dist/examples/invoice-worker.js';

/** The shell block of a section and the output block that follows it. */
function section(heading: string): { calls: ShellCall[]; expected: string[] } {
  const start = SDK_DOC.indexOf(heading);
  if (start < 0) throw new Error(`no section "${heading}" in docs/sdk.md`);
  const rest = SDK_DOC.slice(start + heading.length);
  const next = rest.search(/\n#{2,3} /);
  const blocks = fencedBlocks(next < 0 ? rest : rest.slice(0, next));
  const shell = blocks.find((block) => block.lang === 'sh');
  const output = blocks.find((block) => block.lang === '' && block.text.trimStart().startsWith('{'));
  if (!shell || !output) throw new Error(`"${heading}" needs a sh block and an output block`);
  // Run in order: a reader's `&` only lets the kill that follows it happen.
  return { calls: recordedCalls(shell.text.replace(/ &(?= )/g, ';')), expected: output.text.trim().split('\n') };
}

const INSTANT = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z/g;
const normal = (line: string) => line.replace(INSTANT, '<instant>');

/**
 * The document's lines, where a line "..." stands for any number of lines. With DOCS_RECORD_DIR
 * set, the run's own lines are also written there, to paste into the document after a change.
 */
let recorded = 0;
function expectOutput(actual: string[], expected: string[]): void {
  if (process.env.DOCS_RECORD_DIR)
    writeFileSync(join(process.env.DOCS_RECORD_DIR, `sdk-walkthrough-${++recorded}.txt`), `${actual.join('\n')}\n`);
  const gap = expected.indexOf('...');
  const got = actual.map(normal);
  const want = expected.map(normal);
  if (gap < 0) {
    expect(got).toEqual(want);
    return;
  }
  const head = want.slice(0, gap);
  const tail = want.slice(gap + 1);
  expect(got.slice(0, head.length)).toEqual(head);
  expect(got.slice(got.length - tail.length)).toEqual(tail);
}

let ledger: LedgerProcess;
let provider: InvoiceProvider;

beforeAll(async () => {
  ledger = await startLedger();
  provider = await startInvoiceProvider();
});

afterAll(async () => {
  await provider?.close();
  await ledger?.stop();
  ledger?.cleanup();
});

function startWorker(args: string[]): { child: ChildProcess; lines: () => string[]; exited: Promise<number | null> } {
  expect(args[0]).toBe(WORKER);
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, LEDGER_URL: ledger.baseUrl, PROVIDER_URL: provider.url },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  void exited.then((code) => {
    if (code !== 0 && code !== null) process.stderr.write(`worker exited ${code}: ${stderr}\n`);
  });
  return { child, lines: () => stdout.trim().split('\n').filter(Boolean), exited };
}

async function runWorker(args: string[]): Promise<string[]> {
  const worker = startWorker(args);
  expect(await worker.exited).toBe(0);
  return worker.lines();
}

async function sendToProvider(call: ShellCall): Promise<void> {
  const curl = asCurl(call);
  const url = curl.url.replace(/^(http:\/\/)?localhost:4010/, provider.url);
  const response = await fetch(url, {
    method: curl.method,
    headers: { 'content-type': 'application/json', ...curl.headers },
    body: curl.body,
  });
  expect(response.status).toBeLessThan(300);
}

const workers = (calls: ShellCall[]) => calls.filter((call) => call.command === 'node' && call.args[0] === WORKER);

describe('docs/sdk.md, run', () => {
  it("starts its ledger on a data directory of its own, emptied first: recover() sees only the walkthrough's steps, not the README's", () => {
    const start = SDK_DOC.indexOf('## From a fresh clone to a working worker');
    const shell = fencedBlocks(SDK_DOC.slice(start)).find((block) => block.lang === 'sh');
    const lines = (shell?.text ?? '').split('\n').map((line) => line.trim());
    const startAt = lines.findIndex((line) => /\bnpm start\b/.test(line));
    const dataDir = /^LEDGER_DATA_DIR=(\S+) npm start$/.exec(lines[startAt] ?? '')?.[1];
    expect(dataDir).toBeDefined();
    // ./data is where the README's first operation (run_81/step_4, left verifying) is kept.
    expect(resolve(ROOT, dataDir as string)).not.toBe(resolve(ROOT, 'data'));
    expect(lines.indexOf(`rm -rf ${dataDir}`)).toBeGreaterThanOrEqual(0);
    expect(lines.indexOf(`rm -rf ${dataDir}`)).toBeLessThan(startAt);
  });

  it('from a fresh clone to a working worker: three invoices', async () => {
    const { calls, expected } = section('## From a fresh clone to a working worker');
    const [worker] = workers(calls);
    expectOutput(await runWorker(worker.args), expected);
  });

  it('make the provider fail: an unknown outcome verified, a rate limit waited out', async () => {
    const { calls, expected } = section('### Make the provider fail');
    for (const call of calls.filter((c) => c.command === 'curl')) await sendToProvider(call);
    const [worker] = workers(calls);
    expectOutput(await runWorker(worker.args), expected);
  });

  it('kill the worker and start it again: the second life verifies the same operation_ref', async () => {
    const { calls, expected } = section('### Kill the worker and start it again');
    for (const call of calls.filter((c) => c.command === 'curl')) await sendToProvider(call);
    const [first, second] = workers(calls);
    const ref = 'run_demo/invoice_7';
    const life = startWorker(first.args);
    await until('the create request to reach the provider', () => (provider.createRequests().get(ref) ?? 0) > 0);
    life.child.kill('SIGKILL');
    await life.exited;
    await until('the provider to hold the invoice', () =>
      provider.invoices().some((invoice) => invoice.operation_ref === ref),
    );
    expectOutput(await runWorker(second.args), expected);
    expect(provider.invoices().filter((invoice) => invoice.operation_ref === ref)).toHaveLength(1);
  });
});
