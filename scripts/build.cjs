#!/usr/bin/env node
/**
 * `npm run build` compiles the workspaces in dependency order (the core and the projections with tsc, the client and the
 * agent-framework integrations bundled with tsup, the MCP gateway with tsc), then the server,
 * and stamps dist/ with a digest of the sources it compiled. The server is type-checked with tsc against
 * the packages' built declarations, as an installed package would be, and emitted file by file
 * with swc, the compiler the test tiers run the sources with: the emit needs no type information
 * (dist/ ships no declarations), so the check is the only pass that reads the whole program.
 * `--no-check` leaves the server's type check out: npm test's checks (scripts/checks.cjs) run
 * `npm run typecheck`, which checks the whole tree, beside the build.
 * The agent-framework integrations, and the examples and benches that run them, compile against the
 * frameworks themselves, which are not the repository's dependencies but a test project's
 * (scripts/frameworks.cjs): they are built when test/frameworks is installed and left out, with one
 * line, when it is not (the Dockerfile's build, whose image runs neither).
 * `node scripts/build.cjs --if-stale` (npm start's prestart) compiles only when dist/ is missing or
 * the sources' digest is not the stamp's, so a start with a current build loads no compiler at all.
 * The digest reads the sources' paths and contents, not times: the build itself rewrites the
 * packages' dist/ folders (and tsup a temporary config beside each), which moves folder times
 * past any stamp, and a checkout that puts back the same contents needs no compile.
 * Plain Node and no dependency: it must run before anything is built.
 */
'use strict';
const { spawnSync } = require('node:child_process');
const { createHash } = require('node:crypto');
const { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } = require('node:fs');
const { basename, dirname, join, relative } = require('node:path');
const frameworks = require('./frameworks.cjs');

const root = join(__dirname, '..');
const STAMP = join(root, 'dist', '.build-stamp');
// What tsconfig.build.json compiles, and the settings that shape the output.
const INPUTS = [
  'src',
  'examples',
  'bench',
  'tools',
  'packages',
  'projections',
  'tsconfig.base.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'tsconfig.frameworks.json',
  'test/frameworks/package-lock.json',
];
/** The workspaces, in the order they depend on each other, and how each is compiled. */
const WORKSPACES = [
  { dir: 'packages/core', tool: 'typescript/bin/tsc', args: ['-p', 'tsconfig.json'] },
  { dir: 'projections', tool: 'typescript/bin/tsc', args: ['-p', 'tsconfig.json'] },
  { dir: 'packages/client', tool: 'tsup/dist/cli-default.js', args: ['--silent'] },
  { dir: 'packages/mcp-gateway', tool: 'typescript/bin/tsc', args: ['-p', 'tsconfig.json'] },
  { dir: 'packages/agent-frameworks', tool: 'tsup/dist/cli-default.js', args: ['--silent'] },
];
const PACKAGES = WORKSPACES.filter(({ dir }) => existsSync(join(root, dir, 'package.json')));
/** The server's compilations: what tsc checks and swc emits into dist/. */
const SERVER_CONFIG = 'tsconfig.build.json';
const FRAMEWORKS_CONFIG = 'tsconfig.frameworks.json';
/** What compiles only against the frameworks, and a file each leaves in its output. */
const FRAMEWORK_PACKAGE = 'packages/agent-frameworks';
const FRAMEWORK_OUTPUTS = [
  'packages/agent-frameworks/dist/ai-sdk.js',
  'dist/examples/agent-frameworks/ai-sdk-invoice.js',
];
const SKIP = new Set(['node_modules', 'results', 'figures', '.peers', 'dist']);

/** What a compile reads under INPUTS: sources, the scripts beside them, package and compiler settings. */
const SOURCE_FILE = /\.(?:[cm]?ts|tsx|[cm]?js|json)$/;

/** The paths under `path`, relative to the root, of every file the digest reads. */
function sourceFiles(path, files) {
  const stat = statSync(join(root, path), { throwIfNoEntry: false });
  if (!stat) return files;
  if (!stat.isDirectory()) {
    if (SOURCE_FILE.test(path)) files.push(path);
    return files;
  }
  for (const entry of readdirSync(join(root, path)).sort()) {
    if (!SKIP.has(entry)) sourceFiles(`${path}/${entry}`, files);
  }
  return files;
}

/** One digest of every source file's path and contents: a file added, removed, renamed or edited changes it. */
function sourceDigest() {
  const hash = createHash('sha256');
  for (const file of INPUTS.flatMap((input) => sourceFiles(input, []))) {
    const contents = readFileSync(join(root, file));
    hash.update(`${file}\0${contents.length}\0`).update(contents);
  }
  return `sha256:${hash.digest('hex')}`;
}

function stampedDigest() {
  try {
    return JSON.parse(readFileSync(STAMP, 'utf8')).sources;
  } catch {
    return undefined; // no stamp, or one written by an older build: compile once more
  }
}

function isStale() {
  if (!existsSync(join(root, 'dist', 'src', 'main.js'))) return true;
  if (PACKAGES.some(({ dir }) => !existsSync(join(root, dir, 'dist')))) return true;
  // Built before the frameworks were installed: what needs them is missing.
  if (frameworks.isInstalled() && FRAMEWORK_OUTPUTS.some((output) => !existsSync(join(root, output)))) return true;
  const stamped = stampedDigest();
  return stamped === undefined || stamped !== sourceDigest();
}

function run(tool, args, cwd) {
  const bin = require.resolve(tool, { paths: [root] });
  const result = spawnSync(process.execPath, [bin, ...args], { stdio: 'inherit', cwd });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

/**
 * Emits every source a tsconfig includes into its outDir, laid out under its rootDir as tsc lays
 * it out, with swc and the tsconfig's own settings (target, decorators and their metadata, source
 * maps); CommonJS, as tsconfig.base.json says. Declarations are not emitted: nothing imports the
 * server's.
 */
function emitWithSwc(configFile) {
  const ts = require(require.resolve('typescript', { paths: [root] }));
  const swc = require(require.resolve('@swc/core', { paths: [root] }));
  const parsed = ts.getParsedCommandLineOfConfigFile(
    join(root, configFile),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
      },
    },
  );
  const errors = parsed.errors.filter((diagnostic) => diagnostic.category === ts.DiagnosticCategory.Error);
  if (errors.length > 0) {
    for (const error of errors)
      process.stderr.write(`${configFile}: ${ts.flattenDiagnosticMessageText(error.messageText, '\n')}\n`);
    process.exit(1);
  }
  const { options } = parsed;
  if (options.module !== ts.ModuleKind.CommonJS) throw new Error(`${configFile}: the build emits CommonJS only`);
  const swcOptions = {
    jsc: {
      target: ts.ScriptTarget[options.target].toLowerCase(),
      parser: { syntax: 'typescript', decorators: options.experimentalDecorators === true },
      transform: {
        legacyDecorator: options.experimentalDecorators === true,
        decoratorMetadata: options.emitDecoratorMetadata === true,
        // tsc's default from ES2022 on: class fields are defined, not assigned.
        useDefineForClassFields: options.useDefineForClassFields ?? options.target >= ts.ScriptTarget.ES2022,
      },
    },
    module: { type: 'commonjs', strict: false },
    sourceMaps: options.sourceMap === true,
    inlineSourcesContent: false,
  };
  for (const source of parsed.fileNames) {
    if (source.endsWith('.d.ts') || !source.endsWith('.ts')) continue;
    const output = join(options.outDir, relative(options.rootDir, source)).replace(/\.ts$/, '.js');
    const name = basename(output);
    mkdirSync(dirname(output), { recursive: true });
    let result;
    try {
      result = swc.transformFileSync(source, {
        ...swcOptions,
        filename: source,
        sourceFileName: relative(dirname(output), source),
        outputPath: output,
        swcrc: false,
        configFile: false,
      });
    } catch (error) {
      // swc's message: the source line marked, then a native backtrace no reader needs.
      const message = String(error?.message ?? error)
        .split('\nStack backtrace')[0]
        .trimEnd();
      process.stderr.write(`${relative(root, source)} does not compile:\n${message}\n`);
      process.exit(1);
    }
    if (result.map) {
      writeFileSync(`${output}.map`, result.map);
      writeFileSync(output, `${result.code}\n//# sourceMappingURL=${name}.map\n`);
    } else {
      writeFileSync(output, `${result.code}\n`);
    }
  }
}

/** Empties each package's dist/: a renamed or deleted source must not leave its old output behind. */
function emptyPackageOutputs() {
  for (const { dir } of PACKAGES) {
    const dist = join(root, dir, 'dist');
    mkdirSync(dist, { recursive: true });
    for (const entry of readdirSync(dist)) rmSync(join(dist, entry), { recursive: true, force: true });
  }
}

function build() {
  // Read before anything compiles: a source saved while tsc runs must leave the build stale.
  const sources = sourceDigest();
  emptyPackageOutputs();
  const withFrameworks = frameworks.isInstalled();
  if (!withFrameworks) {
    process.stderr.write(
      'recovery-ledger: the agent-framework integrations and their examples are not built (the frameworks are not installed: node scripts/frameworks.cjs)\n',
    );
  }
  for (const { dir, tool, args } of PACKAGES) {
    if (dir === FRAMEWORK_PACKAGE && !withFrameworks) continue;
    run(tool, args, join(root, dir));
  }
  const configs = withFrameworks ? [SERVER_CONFIG, FRAMEWORKS_CONFIG] : [SERVER_CONFIG];
  if (!process.argv.includes('--no-check')) {
    for (const config of configs) run('typescript/bin/tsc', ['-p', join(root, config), '--noEmit'], root);
  }
  for (const config of configs) emitWithSwc(config);
  mkdirSync(join(root, 'dist'), { recursive: true });
  writeFileSync(STAMP, `${JSON.stringify({ built_at: new Date().toISOString(), sources })}\n`);
}

if (require.main !== module) {
  // The e2e tier asks the same question before it runs dist/ (test/support/build-check.ts).
  module.exports = { isStale };
} else if (process.argv.includes('--if-stale')) {
  if (isStale()) {
    process.stderr.write('recovery-ledger: compiling (dist/ is missing or not the build of these sources)\n');
    build();
  }
} else {
  build();
}
