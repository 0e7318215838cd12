/**
 * The container image's runtime file set, without a container engine: the runtime stage's own
 * COPY lines are read from the Dockerfile, exactly those paths are assembled in a temporary
 * directory outside this checkout (so no module can resolve into the checkout's node_modules),
 * node_modules is pruned as the build stage prunes it (`npm prune --omit=dev`), and the service is
 * started from there on both stores: it must answer liveness, its own HEALTHCHECK command, the
 * incident page, the API docs and a submit. A file the service reads at run time that the image
 * does not carry fails here, as `src/ui/assets` did.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  cpSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  unlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import { EventStoreDbProtocolDouble } from '../support/eventstoredb-protocol-double';
import { fact, request } from '../support/http';
import { copiesOf, execForm, parseDockerfile, type Instruction, type Stage } from '../support/dockerfile';
import { startLedger, type LedgerProcess } from '../support/ledger-process';

const run = promisify(execFile);
const REPO = resolve(__dirname, '../..');

/** A copy of node_modules that shares file contents with the checkout's (hard links), pruned in place. */
function hardLinkTree(source: string, target: string): void {
  cpSync(source, target, {
    recursive: true,
    verbatimSymlinks: true,
    filter: (from) => {
      const stats = statSync(from, { throwIfNoEntry: false });
      if (!stats || stats.isDirectory()) return true;
      const to = join(target, relative(source, from));
      mkdirSync(dirname(to), { recursive: true });
      try {
        linkSync(from, to);
        return false;
      } catch {
        return true; // another file system, or a symlink: a plain copy
      }
    },
  });
}

const dockerfile = readFileSync(join(REPO, 'Dockerfile'), 'utf8');
const stages = parseDockerfile(dockerfile);
const build = stages.find((stage) => stage.name === 'build');
const runtime = stages[stages.length - 1];
const WORKDIR = '/app';

describe('the Dockerfile', () => {
  it('builds and runs on the current Node LTS (24), as a user that is not root, with a health check', () => {
    expect(build).toBeDefined();
    for (const stage of stages) expect(stage.from).toMatch(/^node:24(-|$)/);
    expect(runtime.instructions.find((i) => i.keyword === 'WORKDIR')?.args).toBe(WORKDIR);
    const user = runtime.instructions.filter((i) => i.keyword === 'USER').pop()?.args;
    expect(user).toBeDefined();
    expect(['root', '0', '0:0']).not.toContain(user);
    const healthcheck = runtime.instructions.find((i) => i.keyword === 'HEALTHCHECK');
    expect(healthcheck?.args).toMatch(/\bCMD\b/);
    // The slim image has no curl or wget.
    expect(healthcheck?.args).not.toMatch(/\b(curl|wget)\b/);
  });

  it('sends the build stage every file it copies (nothing it needs is in .dockerignore)', () => {
    const ignored = readFileSync(join(REPO, '.dockerignore'), 'utf8')
      .split('\n')
      .map((line) => line.trim().replace(/^\/|\/$/g, ''))
      .filter((line) => line !== '' && !line.startsWith('#'));
    for (const copy of copiesOf(build as Stage)) {
      for (const source of copy.sources) {
        const hit = ignored.find(
          (pattern) => source === pattern || source.startsWith(`${pattern}/`) || pattern.startsWith(`${source}/`),
        );
        expect({ source, ignoredBy: hit }).toEqual({ source, ignoredBy: undefined });
      }
    }
  });

  it('copies into the runtime stage only what the build stage has: its own COPY lines or what its RUN lines make', () => {
    const built = new Set(
      copiesOf(build as Stage).flatMap((copy) =>
        copy.destination === './' ? copy.sources : [copy.destination.replace(/^\.\//, '')],
      ),
    );
    const madeByRun = new Set(['node_modules', 'dist']); // npm ci / npm prune, npm run build
    for (const copy of copiesOf(runtime)) {
      expect(copy.from).toBe('build');
      for (const source of copy.sources) {
        const path = source.replace(new RegExp(`^${WORKDIR}/`), '');
        const covered = madeByRun.has(path) || [...built].some((made) => path === made || path.startsWith(`${made}/`));
        expect({ path, covered }).toEqual({ path, covered: true });
      }
    }
  });
});

describe('the runtime stage, assembled from its COPY lines and started', () => {
  let root: string;
  let double: EventStoreDbProtocolDouble;

  beforeAll(async () => {
    if (!existsSync(join(REPO, 'dist/src/main.js')))
      throw new Error('dist/src/main.js is missing: run `npm run build` first (npm test does)');
    // Under the system temp directory: module resolution from here never reaches the checkout.
    root = mkdtempSync(join(tmpdir(), 'ledger-image-'));
    for (const copy of copiesOf(runtime)) {
      for (const source of copy.sources) {
        const path = source.replace(new RegExp(`^${WORKDIR}/`), '');
        const target = join(root, copy.destination);
        if (path === 'node_modules') {
          hardLinkTree(join(REPO, 'node_modules'), target);
          continue;
        }
        cpSync(join(REPO, path), target, { recursive: true });
      }
    }
    // The build stage prunes after `npm ci` and the build; prune rewrites the lock files, so they
    // are real copies here, never links into the checkout.
    for (const lock of ['package-lock.json', 'node_modules/.package-lock.json']) {
      const target = join(root, lock);
      if (existsSync(target)) unlinkSync(target);
      if (existsSync(join(REPO, lock))) cpSync(join(REPO, lock), target);
    }
    await run('npm', ['prune', '--omit=dev', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], {
      cwd: root,
      timeout: 120_000,
    });
    rmSync(join(root, 'package-lock.json'));
    double = await EventStoreDbProtocolDouble.start();
  }, 180_000);

  afterAll(async () => {
    await double?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('holds production dependencies only', () => {
    const manifest = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    for (const dependency of Object.keys(manifest.dependencies))
      expect(existsSync(join(root, 'node_modules', dependency))).toBe(true);
    // Development-only packages that nothing in production depends on.
    for (const dependency of [
      'jest',
      'fast-check',
      'dependency-cruiser',
      'tsup',
      'eslint',
      '@swc/core',
      'playwright-core',
    ]) {
      expect({ dependency, present: existsSync(join(root, 'node_modules', dependency)) }).toEqual({
        dependency,
        present: false,
      });
    }
  });

  const cases: Array<{ store: string; env: () => Record<string, string> }> = [
    { store: 'sqlite', env: () => ({ LEDGER_STORE: 'sqlite' }) },
    {
      store: 'eventstoredb (protocol double)',
      env: () => ({ LEDGER_STORE: 'eventstoredb', EVENTSTORE_CONNECTION_STRING: double.connectionString }),
    },
  ];

  for (const { store, env } of cases) {
    describe(`on ${store}`, () => {
      let ledger: LedgerProcess;

      beforeAll(async () => {
        const cmd = execForm(runtime.instructions.find((i) => i.keyword === 'CMD')?.args ?? '');
        expect(cmd[0]).toBe('node');
        // Only the image's own files: the working directory is the assembled root, as in the image.
        ledger = await startLedger({
          main: join(root, cmd[1]),
          cwd: root,
          env: { NODE_ENV: 'production', ...env() },
          timeoutMs: 30_000,
        });
      }, 60_000);

      afterAll(async () => {
        await ledger?.stop();
        ledger?.cleanup();
      });

      it('answers liveness, and the image HEALTHCHECK command exits 0', async () => {
        expect((await request(ledger.baseUrl, 'GET', '/health/live')).status).toBe(200);
        const healthcheck = runtime.instructions.find((i) => i.keyword === 'HEALTHCHECK') as Instruction;
        const [command, ...args] = execForm(healthcheck.args.slice(healthcheck.args.indexOf('CMD')));
        const { stderr } = await run(command === 'node' ? process.execPath : command, args, {
          cwd: root,
          env: { ...process.env, PORT: String(ledger.port) },
          timeout: 10_000,
        });
        expect(stderr).toBe('');
      });

      it('serves the incident page and the API docs from the image files', async () => {
        const page = await request(ledger.baseUrl, 'GET', '/ui');
        expect(page.status).toBe(200);
        expect(page.contentType).toMatch(/text\/html/);
        expect((await request(ledger.baseUrl, 'GET', '/ui/app.js')).status).toBe(200);
        const css = await request(ledger.baseUrl, 'GET', '/docs/swagger-ui.css');
        expect(css.status).toBe(200);
      });

      it('takes a submit and reads it back', async () => {
        const ref = `run_${randomUUID().slice(0, 8)}/step_1`;
        const path = `/v1/operations/${encodeURIComponent(ref)}`;
        const submitted = await request(ledger.baseUrl, 'POST', `${path}/events`, {
          events: [
            fact('StepPlanned', {
              run_id: 'run_image',
              tool: 'create_invoice',
              side_effect: 'write',
              input_hash: 'h1',
            }),
          ],
        });
        expect(submitted.status).toBe(200);
        const state = await request(ledger.baseUrl, 'GET', path);
        expect(state.status).toBe(200);
      });
    });
  }
});
