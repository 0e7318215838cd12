/**
 * `npm start` runs `node scripts/build.cjs --if-stale` first: it compiles only when dist/ is
 * missing or the sources are not those of the last compile (a digest of their paths and
 * contents), so a start with a current build loads no compiler. Checked on a tiny project laid out
 * like this one (a server and workspace packages under packages/, one bundled by tsup), with the
 * repository's script and the real compilers; test/e2e/start-build-check.e2e.spec.ts asks the
 * same of this checkout.
 */
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
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
/**
 * The tiny project's compiler settings. `lib` names the ES library alone: es2022's default adds the
 * DOM's declarations, which make up most of what each of the file's compiles reads and checks.
 */
const TINY_COMPILER_OPTIONS = { module: 'commonjs', target: 'es2022', lib: ['es2022'], types: [] };

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
    JSON.stringify({ compilerOptions: { ...TINY_COMPILER_OPTIONS, outDir: 'dist', rootDir: '.' } }),
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
      compilerOptions: { ...TINY_COMPILER_OPTIONS, outDir: 'dist', rootDir: 'src' },
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

/** Rewrites a file with other contents, its time left as it was: only the contents may decide. */
function edit(file: string, contents: string): void {
  const path = join(project, file);
  const before = new Date(Date.now() - 3_600_000);
  writeFileSync(path, contents);
  utimesSync(path, before, before);
}

describe('the build check before npm start', () => {
  it('compiles when there is no build, then not again while the sources are unchanged', () => {
    expect(start()).toEqual({ compiled: true, status: 0 });
    expect(existsSync(join(project, 'dist/src/main.js'))).toBe(true);
    expect(existsSync(join(project, 'packages/core/dist/index.js'))).toBe(true);
    expect(existsSync(join(project, 'packages/client/dist/index.js'))).toBe(true);
    expect(startWithoutCompiler()).toEqual({ compiled: false, status: 0 });
    expect(startWithoutCompiler()).toEqual({ compiled: false, status: 0 });
  });

  it('does not compile again after a full rebuild of an unchanged checkout (npm run build, then npm start twice)', () => {
    const build = spawnSync(process.execPath, [join(project, 'scripts/build.cjs')], { encoding: 'utf8' });
    expect(build.status).toBe(0);
    expect(startWithoutCompiler()).toEqual({ compiled: false, status: 0 });
    expect(startWithoutCompiler()).toEqual({ compiled: false, status: 0 });
  });

  it('does not compile for times alone, nor for a file that is no source (a packed tarball beside a package)', () => {
    const later = new Date(Date.now() + 60_000);
    utimesSync(join(project, 'src/main.ts'), later, later);
    utimesSync(join(project, 'packages/client'), later, later);
    writeFileSync(join(project, 'packages/client/client-0.0.0.tgz'), 'not a source');
    expect(startWithoutCompiler()).toEqual({ compiled: false, status: 0 });
    rmSync(join(project, 'packages/client/client-0.0.0.tgz'));
  });

  it('compiles again when a server source changed, even one whose time is older than the build', () => {
    edit('src/main.ts', 'export const answer: number = 43;\n');
    expect(start()).toEqual({ compiled: true, status: 0 });
    expect(readFileSync(join(project, 'dist/src/main.js'), 'utf8')).toContain('43');
    expect(startWithoutCompiler()).toEqual({ compiled: false, status: 0 });
  });

  it('compiles again when a package source changed', () => {
    edit('packages/core/src/index.ts', 'export const question = 7 * 6;\n');
    expect(start()).toEqual({ compiled: true, status: 0 });
    expect(startWithoutCompiler()).toEqual({ compiled: false, status: 0 });
  });

  it('compiles again when a source was added', () => {
    writeFileSync(join(project, 'packages/client/src/extra.ts'), 'export const extra = 1;\n');
    expect(start()).toEqual({ compiled: true, status: 0 });
    expect(startWithoutCompiler()).toEqual({ compiled: false, status: 0 });
  });

  it('compiles again when the package outputs are gone, though the sources are unchanged', () => {
    rmSync(join(project, 'packages/core/dist'), { recursive: true });
    expect(start()).toEqual({ compiled: true, status: 0 });
    expect(existsSync(join(project, 'packages/core/dist/index.js'))).toBe(true);
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
