/**
 * `--help` is what a new user types first: the bench and every example print their usage and exit
 * 0, before anything is built, installed, measured or sent (the bench's full run takes 16 minutes
 * and writes 2 GB; an example would reach a ledger and a provider).
 */
import { spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { FRAMEWORK_MODULES } from '../support/frameworks';

const ROOT = resolve(__dirname, '../..');
// A guard so a regression fails this test instead of running on: never an assertion on time.
const GUARD_MS = 60_000;

describe('--help prints the usage and does nothing else', () => {
  it('npm run bench -- --help: the usage, no build, no bench', () => {
    const stamp = statSync(join(ROOT, 'dist/.build-stamp'), { throwIfNoEntry: false })?.mtimeMs;
    const run = spawnSync('npm', ['run', '--silent', 'bench', '--', '--help'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: GUARD_MS,
      killSignal: 'SIGKILL',
    });
    expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
    expect(run.stdout).toContain('npm run bench -- --help');
    expect(run.stdout).toContain('node dist/bench/run.js --only tool-steps');
    expect(statSync(join(ROOT, 'dist/.build-stamp'), { throwIfNoEntry: false })?.mtimeMs).toBe(stamp);
  });

  it.each([
    'feed-worker',
    'invoice-worker',
    'start-invoices',
    'mcp-gateway-session',
    'invoice-provider/main',
    'invoice-mcp-server/main',
    'agent-frameworks/ai-sdk-invoice',
    'agent-frameworks/langchain-invoice',
    'agent-frameworks/mastra-invoice',
    'agent-frameworks/openai-agents-invoice',
  ])('examples/%s --help: its usage, exit 0, nothing started', (example) => {
    const file = join(ROOT, 'dist/examples', `${example}.js`);
    // A port nothing listens on: an example that ignored --help would fail here rather than reach a real ledger.
    const run = spawnSync(process.execPath, [file, '--help', '--ledger', 'http://127.0.0.1:9', '--port', '0'], {
      cwd: ROOT,
      // The agent-framework examples load their framework from its test project (docs/integrations.md).
      env: { ...process.env, NODE_PATH: FRAMEWORK_MODULES },
      encoding: 'utf8',
      timeout: GUARD_MS,
      killSignal: 'SIGKILL',
    });
    expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
    expect(run.stdout).toContain(`node dist/examples/${example}.js`);
    expect(run.stdout).not.toMatch(/^\{/m); // no JSON line: nothing ran
  });
});
