/**
 * npm test's first step (scripts/checks.cjs): the checks side by side, and the tiers (what follows
 * `--`) started once the build is done, beside the checks still running. Checked with the
 * repository's script in a tiny project whose package.json scripts stand in for the checks: a check
 * that fails still fails the run when the tiers pass, and a failed build starts no tiers.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');
let project: string;

/** A script that writes when it ended (ms since the epoch) to `file`, after `ms`, and exits with `code`. */
const stamped = (file: string, ms: number, code: number) =>
  `node -e "setTimeout(() => { require('fs').writeFileSync('${file}', String(Date.now())); process.exit(${code}); }, ${ms})"`;

function runChecks(scripts: Record<string, string>, args: string[]): { status: number | null; output: string } {
  for (const file of ['build.done', 'slow.done', 'tiers.started']) rmSync(join(project, file), { force: true });
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'tiny', private: true, scripts }));
  const run = spawnSync(process.execPath, [join(project, 'scripts/checks.cjs'), ...args], {
    cwd: project,
    encoding: 'utf8',
  });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

/**
 * A check that ends only once the tiers have started (or after a minute, when they never start while
 * it runs), then fails: the order is made by the runner, never by a guess at how long a start takes.
 */
const CHECK_OUTLASTING_THE_TIERS = `node -e "const fs = require('fs'); const from = Date.now(); (function poll() { if (fs.existsSync('tiers.started') || Date.now() - from > 60000) { fs.writeFileSync('slow.done', String(Date.now())); process.exit(1); } setTimeout(poll, 20); })()"`;

const stampOf = (file: string) => Number(readFileSync(join(project, file), 'utf8'));
const TIERS = ['--', process.execPath, '-e', "require('fs').writeFileSync('tiers.started', String(Date.now()))"];

beforeAll(() => {
  project = mkdtempSync(join(tmpdir(), 'checks-runner-'));
  mkdirSync(join(project, 'scripts'));
  copyFileSync(join(ROOT, 'scripts/checks.cjs'), join(project, 'scripts/checks.cjs'));
});

afterAll(() => rmSync(project, { recursive: true, force: true }));

describe('scripts/checks.cjs', () => {
  it('starts the tiers once the build is done, before a longer check has ended, and fails when that check fails', () => {
    const result = runChecks({ build: stamped('build.done', 0, 0), slow: CHECK_OUTLASTING_THE_TIERS }, [
      'build',
      'slow',
      ...TIERS,
    ]);
    expect(result.status).toBe(1);
    expect(result.output).toContain('Failed: npm run slow');
    expect(stampOf('tiers.started')).toBeGreaterThanOrEqual(stampOf('build.done'));
    // Ordered by what each wrote, not by a duration: the tiers had started when the slow check ended.
    expect(stampOf('tiers.started')).toBeLessThan(stampOf('slow.done'));
  });

  it('starts no tiers when the build fails', () => {
    const result = runChecks({ build: stamped('build.done', 0, 2) }, ['build', ...TIERS]);
    expect(result.status).toBe(1);
    expect(existsSync(join(project, 'tiers.started'))).toBe(false);
    expect(result.output).toContain('Not run, the build having failed');
  });

  it('fails when the tiers fail, every check having passed', () => {
    const result = runChecks({ build: stamped('build.done', 0, 0) }, [
      'build',
      '--',
      process.execPath,
      '-e',
      'process.exit(3)',
    ]);
    expect(result.status).toBe(1);
    expect(result.output).toMatch(/Failed: .*process\.exit\(3\)/);
  });
});
