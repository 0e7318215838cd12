/**
 * `npm start` runs `node scripts/build.cjs --if-stale` first: it compiles only when dist/ is
 * missing or a source is newer than the last compile, so a start with a current build loads no
 * compiler. Checked on a tiny project laid out like this one (a server and a workspace package
 * under packages/), with the real script and TypeScript.
 */
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  renameSync,
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

/** A start with no compiler installed: it can only succeed when it compiles nothing. */
function startWithoutCompiler(): { compiled: boolean; status: number | null } {
  const compilers = ['typescript', 'tsup', '@swc/core'].map((name) => join(project, 'node_modules', name));
  for (const compiler of compilers) renameSync(compiler, `${compiler}.away`);
  try {
    return start();
  } finally {
    for (const compiler of compilers) renameSync(`${compiler}.away`, compiler);
  }
}

beforeAll(() => {
  project = mkdtempSync(join(tmpdir(), 'ledger-build-check-'));
  mkdirSync(join(project, 'scripts'));
  mkdirSync(join(project, 'src'));
  mkdirSync(join(project, 'node_modules'));
  copyFileSync(join(ROOT, 'scripts/build.cjs'), join(project, 'scripts/build.cjs'));
  // What it reads to know whether the agent frameworks' test project is installed (here it is not).
  copyFileSync(join(ROOT, 'scripts/frameworks.cjs'), join(project, 'scripts/frameworks.cjs'));
  symlinkSync(join(ROOT, 'node_modules/typescript'), join(project, 'node_modules/typescript'), 'dir');
  writeFileSync(join(project, 'src/main.ts'), 'export const answer: number = 42;\n');
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { module: 'commonjs', target: 'es2022', outDir: 'dist', rootDir: '.', types: [] },
    }),
  );
  writeFileSync(join(project, 'tsconfig.build.json'), JSON.stringify({ extends: './tsconfig.json', include: ['src'] }));
  symlinkSync(join(ROOT, 'node_modules/tsup'), join(project, 'node_modules/tsup'), 'dir');
  // The server's emitter (tsc checks it, swc writes it).
  mkdirSync(join(project, 'node_modules/@swc'));
  symlinkSync(join(ROOT, 'node_modules/@swc/core'), join(project, 'node_modules/@swc/core'), 'dir');
  // Workspace packages, compiled first into their own dist/ as packages/core (tsc) and
  // packages/client (tsup, which writes a temporary bundled config beside its own) are.
  const core = join(project, 'packages/core');
  mkdirSync(join(core, 'src'), { recursive: true });
  writeFileSync(join(core, 'package.json'), JSON.stringify({ name: 'core', version: '0.0.0', main: 'dist/index.js' }));
  writeFileSync(join(core, 'src/index.ts'), 'export const question = 6 * 7;\n');
  writeFileSync(
    join(core, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { module: 'commonjs', target: 'es2022', outDir: 'dist', rootDir: 'src', types: [] },
      include: ['src'],
    }),
  );
  const client = join(project, 'packages/client');
  mkdirSync(join(client, 'src'), { recursive: true });
  writeFileSync(
    join(client, 'package.json'),
    JSON.stringify({ name: 'client', version: '0.0.0', main: 'dist/index.js' }),
  );
  writeFileSync(join(client, 'src/index.ts'), 'export const greeting: string = "hello";\n');
  writeFileSync(
    join(client, 'tsup.config.ts'),
    "import { defineConfig } from 'tsup';\nexport default defineConfig({ entry: ['src/index.ts'], format: ['cjs'], clean: true });\n",
  );
});

afterAll(() => {
  if (project) rmSync(project, { recursive: true, force: true });
});

describe('the build check before npm start', () => {
  it('compiles when there is no build, then not again while the build is current', () => {
    expect(start()).toEqual({ compiled: true, status: 0 });
    expect(existsSync(join(project, 'dist/src/main.js'))).toBe(true);
    expect(existsSync(join(project, 'packages/core/dist/index.js'))).toBe(true);
    expect(existsSync(join(project, 'packages/client/dist/index.js'))).toBe(true);
    expect(startWithoutCompiler()).toEqual({ compiled: false, status: 0 });
  });

  it('does not compile again after a full rebuild of an unchanged checkout (npm run build, then npm start)', () => {
    const build = spawnSync(process.execPath, [join(project, 'scripts/build.cjs')], { encoding: 'utf8' });
    expect(build.status).toBe(0);
    expect(startWithoutCompiler()).toEqual({ compiled: false, status: 0 });
    expect(startWithoutCompiler()).toEqual({ compiled: false, status: 0 });
  });

  it('compiles again when a source is newer than the build', () => {
    // The last compile a minute ago, the source saved after it.
    const compiled = new Date(Date.now() - 60_000);
    const saved = new Date(Date.now() - 30_000);
    utimesSync(join(project, 'dist/.build-stamp'), compiled, compiled);
    utimesSync(join(project, 'src/main.ts'), saved, saved);
    expect(start()).toEqual({ compiled: true, status: 0 });
    expect(startWithoutCompiler()).toEqual({ compiled: false, status: 0 });
  });

  it('compiles again when a package source is newer than the build', () => {
    const compiled = new Date(Date.now() - 60_000);
    const saved = new Date(Date.now() - 30_000);
    utimesSync(join(project, 'dist/.build-stamp'), compiled, compiled);
    utimesSync(join(project, 'packages/core/src/index.ts'), saved, saved);
    expect(start()).toEqual({ compiled: true, status: 0 });
    expect(startWithoutCompiler()).toEqual({ compiled: false, status: 0 });
  });

  it('fails the start when the sources do not compile', () => {
    writeFileSync(join(project, 'src/main.ts'), 'export const answer: number = "not a number";\n');
    expect(start().status).not.toBe(0);
  });
});

describe("the build beside npm test's type check", () => {
  it('leaves the type check out (npm run typecheck runs beside it) but still fails on sources that do not parse', () => {
    writeFileSync(join(project, 'src/main.ts'), 'export const answer: number = ;\n');
    const build = spawnSync(process.execPath, [join(project, 'scripts/build.cjs'), '--no-check'], { encoding: 'utf8' });
    expect(build.status).not.toBe(0);
    expect(build.stderr).toContain('main.ts');
  });
});
