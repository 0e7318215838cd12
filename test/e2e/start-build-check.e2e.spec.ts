/**
 * A second `npm start` of an unchanged checkout loads no compiler: the prestart step
 * (`node scripts/build.cjs --if-stale`) run on this checkout, whose build the e2e tier has checked
 * to be current, twice, with every compiler it resolves recorded (test/support/compiler-watch.cjs).
 * The stale check on a project of its own, edits included: test/int/start-build-check.int.spec.ts.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { assertBuildCurrent } from '../support/build-check';

const ROOT = resolve(__dirname, '../..');
const STAMP = join(ROOT, 'dist/.build-stamp');
let scratch: string;

beforeAll(() => {
  assertBuildCurrent();
  scratch = mkdtempSync(join(tmpdir(), 'ledger-prestart-'));
});

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** npm start's prestart, as package.json runs it, with the compilers it resolved. */
function prestart(run: number): { status: number | null; stderr: string; compilers: string[] } {
  const prestartScript = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.prestart as string;
  expect(prestartScript).toBe('node scripts/build.cjs --if-stale');
  const watch = join(scratch, `compilers-${run}.json`);
  const result = spawnSync(
    process.execPath,
    ['--require', join(__dirname, '../support/compiler-watch.cjs'), 'scripts/build.cjs', '--if-stale'],
    { cwd: ROOT, encoding: 'utf8', env: { ...process.env, COMPILER_WATCH_FILE: watch } },
  );
  return { status: result.status, stderr: result.stderr, compilers: JSON.parse(readFileSync(watch, 'utf8')) };
}

describe('npm start on a current build', () => {
  it('compiles nothing and loads no compiler, the first time and the second', () => {
    const stamp = readFileSync(STAMP, 'utf8');
    const stampTime = statSync(STAMP).mtimeMs;
    for (const run of [1, 2]) {
      expect({ run, ...prestart(run) }).toEqual({ run, status: 0, stderr: '', compilers: [] });
    }
    expect(readFileSync(STAMP, 'utf8')).toBe(stamp);
    expect(statSync(STAMP).mtimeMs).toBe(stampTime);
  });
});
