/**
 * The fixed scenario (docs/architecture.md, "Changing how it is put together, not what it
 * answers") is a fair comparison only if two runs of one build print the same bytes: it is run
 * twice here, against the built service, and the outputs compared.
 */
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const SCENARIO = resolve(__dirname, '../../dist/tools/fixed-scenario.js');

it('prints the same bytes on every run of one build, refusals and reads included', async () => {
  const first = await run(process.execPath, [SCENARIO], { maxBuffer: 64 * 1024 * 1024, timeout: 120_000 });
  const second = await run(process.execPath, [SCENARIO], { maxBuffer: 64 * 1024 * 1024, timeout: 120_000 });
  expect(second.stdout).toBe(first.stdout);
  // What it prints is the ledger's answers: a refusal, a malformed body, a read and the CLI's verdict.
  expect(first.stdout).toContain('## unknown dispatch 2: POST /v1/operations/run_fixed%2Funknown/events -> 409');
  expect(first.stdout).toContain('"code": "VERIFY_BEFORE_RETRY"');
  expect(first.stdout).toMatch(/## not JSON: POST .* -> 400 application\/problem\+json/);
  expect(first.stdout).toContain('## cli verify (exit 0)');
}, 240_000);
