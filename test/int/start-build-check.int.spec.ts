/**
 * `npm start` runs `node scripts/build.cjs --if-stale` first: it compiles only when dist/ is
 * missing or a source is newer than the last compile, so a start with a current build loads no
 * compiler. Checked on a tiny project laid out like this one, with the real script and TypeScript.
 */
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');
let project: string;

function start(): { compiled: boolean; status: number | null } {
  const run = spawnSync(process.execPath, [join(project, 'scripts/build.cjs'), '--if-stale'], { encoding: 'utf8' });
  return { compiled: /compiling/.test(run.stderr), status: run.status };
}

beforeAll(() => {
  project = mkdtempSync(join(tmpdir(), 'ledger-build-check-'));
  mkdirSync(join(project, 'scripts'));
  mkdirSync(join(project, 'src'));
  mkdirSync(join(project, 'node_modules'));
  copyFileSync(join(ROOT, 'scripts/build.cjs'), join(project, 'scripts/build.cjs'));
  symlinkSync(join(ROOT, 'node_modules/typescript'), join(project, 'node_modules/typescript'), 'dir');
  writeFileSync(join(project, 'src/main.ts'), 'export const answer: number = 42;\n');
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { module: 'commonjs', target: 'es2022', outDir: 'dist', rootDir: '.', types: [] },
    }),
  );
  writeFileSync(join(project, 'tsconfig.build.json'), JSON.stringify({ extends: './tsconfig.json', include: ['src'] }));
});

afterAll(() => {
  if (project) rmSync(project, { recursive: true, force: true });
});

describe('the build check before npm start', () => {
  it('compiles when there is no build, then not again while the build is current', () => {
    expect(start()).toEqual({ compiled: true, status: 0 });
    expect(existsSync(join(project, 'dist/src/main.js'))).toBe(true);
    expect(start()).toEqual({ compiled: false, status: 0 });
  });

  it('compiles again when a source is newer than the build', () => {
    // The last compile a minute ago, the source saved after it.
    const compiled = new Date(Date.now() - 60_000);
    const saved = new Date(Date.now() - 30_000);
    utimesSync(join(project, 'dist/.build-stamp'), compiled, compiled);
    utimesSync(join(project, 'src/main.ts'), saved, saved);
    expect(start()).toEqual({ compiled: true, status: 0 });
    expect(start()).toEqual({ compiled: false, status: 0 });
  });

  it('fails the start when the sources do not compile', () => {
    writeFileSync(join(project, 'src/main.ts'), 'export const answer: number = "not a number";\n');
    expect(start().status).not.toBe(0);
  });
});
