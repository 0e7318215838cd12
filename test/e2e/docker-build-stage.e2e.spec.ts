/**
 * The image, built without a container engine, from the Dockerfile's own lines: the build stage is
 * assembled in a temporary directory from its COPY lines (the build context filtered by
 * .dockerignore), its RUN lines are run there for real (`npm ci`, `npm run build`, `npm prune`),
 * the runtime stage is assembled from that output by its COPY --from=build lines, and the service
 * is started from it with docker-compose.yml's environment for the `ledger` service, API keys
 * included. A file the build reads that the stage does not copy (scripts/build.cjs was one), or an
 * example key the service refuses at start (the compose keys were 15 characters), fails here.
 *
 * What differs from `docker compose up`, and why:
 * - the machine's Node runs every step, not the node:24 image's (CI runs this on 20 and on 24);
 * - npm may answer from its cache (`prefer-offline`): the same lock file and integrity hashes;
 * - better-sqlite3's install script (prebuild-install) finds its prebuilt binary for this Node in a
 *   local folder (its `local_prebuilds` setting) instead of downloading it from the project's
 *   releases: the checkout's own build of the addon, packed as that download is. Without it, a
 *   machine that cannot reach the releases compiles SQLite from source on every run (about 75 s of
 *   CPU), which `docker build` on a connected machine does not;
 * - the runtime stage's RUN (`mkdir /data && chown`) is not run: a temporary directory is the
 *   /data volume;
 * - the service binds to 127.0.0.1 on a free port instead of 0.0.0.0:3000, and talks to the
 *   in-process EventStoreDB protocol double instead of the compose network's `eventstore` host.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { copyOf, envOf, execForm, parseDockerfile, type Instruction } from '../support/dockerfile';
import { EventStoreDbProtocolDouble } from '../support/eventstoredb-protocol-double';
import { request } from '../support/http';
import { freePort, startLedger, type LedgerProcess } from '../support/ledger-process';

const run = promisify(execFile);
const REPO = resolve(__dirname, '../..');
const WORKDIR = '/app';
const stages = parseDockerfile(readFileSync(join(REPO, 'Dockerfile'), 'utf8'));
const buildStage = stages.find((stage) => stage.name === 'build');
const runtimeStage = stages[stages.length - 1];
const compose = parseYaml(readFileSync(join(REPO, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, { build?: unknown; environment?: Record<string, string | number> }>;
};
/** RUN lines of the runtime stage that only prepare the container's own file system. */
const RUNTIME_RUN_STANDS_IN = new Map([['mkdir -p /data && chown node:node /data', 'a temporary directory is /data']]);

/** .dockerignore as Docker reads it: paths from the context root, `*` within a segment, `**` across. */
function dockerignore(): (relativePath: string) => boolean {
  const patterns = readFileSync(join(REPO, '.dockerignore'), 'utf8')
    .split('\n')
    .map((line) => line.trim().replace(/^\/|\/$/g, ''))
    .filter((line) => line !== '' && !line.startsWith('#'));
  if (patterns.some((pattern) => pattern.startsWith('!')))
    throw new Error('.dockerignore exceptions (!) are not read here: extend dockerignore()');
  const expressions = patterns.map((pattern) => {
    const body = pattern
      .split('**')
      .map((part) =>
        part
          .replace(/[.+^${}()|[\]\\]/g, '\\$&')
          .replace(/\*/g, '[^/]*')
          .replace(/\?/g, '[^/]'),
      )
      .join('.*');
    return new RegExp(`^${body}(/|$)`); // a matched folder excludes everything under it
  });
  return (relativePath) => expressions.some((expression) => expression.test(relativePath));
}

/**
 * better-sqlite3's prebuilt binary for the Node running here, as prebuild-install downloads it
 * (`<name>-v<version>-node-v<abi>-<platform>-<arch>.tar.gz` holding build/Release/<addon>.node),
 * made from the checkout's own addon when that loads in this Node; otherwise none, and the stage
 * compiles it.
 */
async function localPrebuilds(scratch: string): Promise<string | undefined> {
  const addonRoot = join(REPO, 'node_modules/better-sqlite3');
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only to see that the addon is this Node's
    require(join(addonRoot, 'build/Release/better_sqlite3.node'));
  } catch {
    return undefined;
  }
  const { version } = JSON.parse(readFileSync(join(addonRoot, 'package.json'), 'utf8')) as { version: string };
  const folder = join(scratch, 'prebuilds');
  const packed = join(folder, 'pack/build/Release');
  mkdirSync(packed, { recursive: true });
  cpSync(join(addonRoot, 'build/Release/better_sqlite3.node'), join(packed, 'better_sqlite3.node'));
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  await run('tar', ['-czf', join(folder, name), '-C', join(folder, 'pack'), 'build']);
  return folder;
}

/** Only what the RUN lines need from the host: the tools on PATH, npm's cache, a proxy, and the Node headers node-gyp builds against when npm is set to another Node's (README, "Node versions"). */
function runEnvironment(stageEnv: Record<string, string>, prebuilds: string | undefined): Record<string, string> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? tmpdir(),
    npm_config_prefer_offline: 'true',
    npm_config_update_notifier: 'false',
    ...(prebuilds ? { npm_config_better_sqlite3_local_prebuilds: prebuilds } : {}),
  };
  for (const [name, value] of Object.entries(process.env))
    if (/^(https?_proxy|no_proxy|npm_config_cache|npm_config_nodedir)$/i.test(name) && value) env[name] = value;
  return { ...env, ...stageEnv };
}

function targetOf(root: string, destination: string, source: string, sources: number): string {
  const inStage = destination.startsWith('/') ? destination : join(WORKDIR, destination);
  const path = join(root, inStage.slice(WORKDIR.length));
  if (!inStage.startsWith(WORKDIR)) throw new Error(`a COPY outside ${WORKDIR} is not assembled here: ${destination}`);
  return destination.endsWith('/') || sources > 1 ? join(path, basename(source)) : path;
}

describe('the Docker image, built from the Dockerfile and started with docker-compose.yml', () => {
  let scratch: string;
  let buildRoot: string;
  let runtimeRoot: string;
  let runtimeEnv: Record<string, string> = {};
  const ran: Array<{ line: string; output: string }> = [];

  beforeAll(async () => {
    expect(buildStage).toBeDefined();
    // Under the system temp directory: module resolution from here never reaches the checkout.
    scratch = mkdtempSync(join(tmpdir(), 'ledger-docker-build-'));
    buildRoot = join(scratch, 'build');
    runtimeRoot = join(scratch, 'runtime');
    const ignored = dockerignore();
    const prebuilds = await localPrebuilds(scratch);

    let buildEnv: Record<string, string> = {};
    for (const instruction of buildStage?.instructions ?? []) {
      if (instruction.keyword === 'WORKDIR') {
        expect(instruction.args).toBe(WORKDIR);
        mkdirSync(buildRoot, { recursive: true });
      } else if (instruction.keyword === 'ENV') {
        buildEnv = { ...buildEnv, ...envOf(instruction) };
      } else if (instruction.keyword === 'COPY') {
        const copy = copyOf(instruction);
        expect(copy.from).toBeUndefined();
        for (const source of copy.sources) {
          if (ignored(source)) throw new Error(`COPY ${source}: the build context does not send it (.dockerignore)`);
          if (!existsSync(join(REPO, source))) throw new Error(`COPY ${source}: no such path in the build context`);
          cpSync(join(REPO, source), targetOf(buildRoot, copy.destination, source, copy.sources.length), {
            recursive: true,
            filter: (from) => !ignored(from.slice(REPO.length + 1)),
          });
        }
      } else if (instruction.keyword === 'RUN') {
        // The shell form, as Docker runs it: /bin/sh -c.
        try {
          const { stdout, stderr } = await run('/bin/sh', ['-c', instruction.args], {
            cwd: buildRoot,
            env: runEnvironment(buildEnv, prebuilds),
            timeout: 900_000,
            maxBuffer: 64 * 1024 * 1024,
          });
          ran.push({ line: instruction.args, output: stdout + stderr });
        } catch (error) {
          const failed = error as { stdout?: string; stderr?: string; message: string };
          throw new Error(
            `RUN ${instruction.args} failed in the build stage:\n${failed.stderr ?? ''}${failed.stdout ?? ''}\n${failed.message}`,
            { cause: error },
          );
        }
      } else {
        throw new Error(`build stage: ${instruction.keyword} is not assembled here; extend this test`);
      }
    }

    mkdirSync(runtimeRoot, { recursive: true });
    for (const instruction of runtimeStage.instructions) {
      if (instruction.keyword === 'WORKDIR') expect(instruction.args).toBe(WORKDIR);
      else if (instruction.keyword === 'ENV') runtimeEnv = { ...runtimeEnv, ...envOf(instruction) };
      else if (instruction.keyword === 'COPY') {
        const copy = copyOf(instruction);
        expect(copy.from).toBe('build');
        for (const source of copy.sources) {
          if (!source.startsWith(`${WORKDIR}/`)) throw new Error(`COPY --from=build ${source}: not under ${WORKDIR}`);
          const from = join(buildRoot, source.slice(WORKDIR.length + 1));
          if (!existsSync(from)) throw new Error(`COPY --from=build ${source}: the build stage did not make it`);
          cpSync(from, targetOf(runtimeRoot, copy.destination, source, copy.sources.length), {
            recursive: true,
            verbatimSymlinks: true,
          });
        }
      } else if (instruction.keyword === 'RUN' && !RUNTIME_RUN_STANDS_IN.has(instruction.args)) {
        throw new Error(`runtime stage: RUN ${instruction.args} is not reproduced here; extend this test`);
      }
    }
  }, 1_500_000);

  afterAll(() => {
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('runs every RUN line of the build stage, and leaves a pruned node_modules and a built dist/', () => {
    expect(ran.length).toBe(buildStage?.instructions.filter((i) => i.keyword === 'RUN').length);
    expect(existsSync(join(buildRoot, 'dist/src/main.js'))).toBe(true);
    // npm prune --omit=dev ran: the test runner is gone, the native store module stays.
    expect(existsSync(join(buildRoot, 'node_modules/jest'))).toBe(false);
    expect(existsSync(join(buildRoot, 'node_modules/better-sqlite3'))).toBe(true);
    // No dependency declares an engine that excludes the Node running here, so npm ci warns of none
    // (the agent frameworks, whose engines exclude Node 20, are a test project's: scripts/frameworks.cjs),
    // and no install script runs that package.json's allowScripts does not name.
    const npmCi = ran.find(({ line }) => /\bnpm ci\b/.test(line))?.output ?? '';
    const excludedBy = [...npmCi.matchAll(/package: '((?:@[^/']+\/)?[^@']+)@/g)].map((match) => match[1]);
    expect(excludedBy).toEqual([]);
    expect(npmCi).not.toMatch(/allowScripts|install scripts?/i);
  });

  describe("the runtime stage, with the compose file's environment", () => {
    let double: EventStoreDbProtocolDouble;
    let ledger: LedgerProcess;
    let dataDir: string;
    const service = compose.services.ledger;
    // As compose resolves `${VAR:-default}` with VAR unset: the example keys.
    const composeEnv = Object.fromEntries(
      Object.entries(service?.environment ?? {}).map(([name, value]) => [
        name,
        String(value).replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1'),
      ]),
    );
    const keys = (composeEnv.LEDGER_API_KEYS ?? '').split(',').map((entry) => entry.split(':'));

    beforeAll(async () => {
      expect(service?.build).toBe('.');
      expect(composeEnv.LEDGER_STORE).toBe('eventstoredb');
      double = await EventStoreDbProtocolDouble.start();
      dataDir = mkdtempSync(join(tmpdir(), 'ledger-docker-data-'));
      const cmd = execForm(runtimeStage.instructions.find((i) => i.keyword === 'CMD')?.args ?? '');
      expect(cmd[0]).toBe('node');
      const port = await freePort();
      ledger = await startLedger({
        main: join(runtimeRoot, cmd[1]),
        cwd: runtimeRoot,
        dataDir,
        port,
        timeoutMs: 60_000,
        env: {
          ...runtimeEnv,
          ...composeEnv,
          LOG_LEVEL: 'warn',
          LEDGER_DATA_DIR: dataDir,
          PORT: String(port),
          HOST: '127.0.0.1',
          EVENTSTORE_CONNECTION_STRING: double.connectionString,
        },
      });
    }, 120_000);

    afterAll(async () => {
      await ledger?.stop();
      // The data directory, also when the service never started.
      if (dataDir) rmSync(dataDir, { recursive: true, force: true });
      await double?.stop();
    });

    it('is ready (/health/ready), and its HEALTHCHECK command exits 0', async () => {
      const ready = await request(ledger.baseUrl, 'GET', '/health/ready');
      expect({ status: ready.status, body: ready.body }).toEqual({ status: 200, body: expect.anything() });
      const healthcheck = runtimeStage.instructions.find((i) => i.keyword === 'HEALTHCHECK') as Instruction;
      const [command, ...args] = execForm(healthcheck.args.slice(healthcheck.args.indexOf('CMD')));
      await run(command === 'node' ? process.execPath : command, args, {
        cwd: runtimeRoot,
        env: { ...process.env, PORT: String(ledger.port) },
        timeout: 10_000,
      });
    });

    it("takes the compose file's example keys, and refuses a request without one", async () => {
      expect(keys.length).toBeGreaterThan(0);
      const path = `/v1/operations/${encodeURIComponent('run_compose/step_1')}`;
      expect((await request(ledger.baseUrl, 'GET', path)).status).toBe(401);
      for (const [key, role] of keys) {
        const answer = await request(ledger.baseUrl, 'GET', path, undefined, { authorization: `Bearer ${key}` });
        // 401 is a key the service does not know; any other answer (404: no such operation yet) took it.
        expect({ role, status: String(answer.status) }).toEqual({ role, status: expect.not.stringMatching(/^401$/) });
      }
    });
  });
});

describe('docker-compose.yml', () => {
  it('is a file `docker compose config` accepts (where docker compose is installed)', async () => {
    const probe = await run('docker', ['compose', 'version'], { timeout: 30_000 }).then(
      () => undefined,
      (error: { code?: string; stderr?: string; message: string }) =>
        error.code === 'ENOENT' ? 'no docker command on PATH' : (error.stderr || error.message).trim(),
    );
    if (probe !== undefined) {
      console.log(`docker compose config skipped: \`docker compose version\` failed here (${probe})`);
      return;
    }
    await run('docker', ['compose', '-f', join(REPO, 'docker-compose.yml'), 'config', '--quiet'], {
      cwd: REPO,
      timeout: 60_000,
    });
    await run(
      'docker',
      ['compose', '-f', join(REPO, 'docker-compose.yml'), '--profile', 'cluster', 'config', '--quiet'],
      { cwd: REPO, timeout: 60_000 },
    );
  });
});
