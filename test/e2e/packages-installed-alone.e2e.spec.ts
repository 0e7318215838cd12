/**
 * The workspaces as a runtime gets them: each package is packed with `npm pack` (the tarball a
 * registry would serve), installed into an empty project outside this checkout, and used there
 * against the built service over real HTTP, with the example invoice provider as a real process.
 *
 * - the client installs with nothing else (no dependency at all) and drives executeWrite, verify
 *   and LedgerWorker, from CommonJS and from an ES module;
 * - the MCP gateway installs with the client's tarball and its declared dependencies, and its own
 *   `recovery-ledger-mcp-gateway` bin serves a real MCP client;
 * - the core installs alone and decides;
 * - the agent-framework integrations install with the client and the one framework a runtime uses
 *   (the others are optional peers, never installed), and a ledgered AI SDK tool writes once.
 *
 * Needs the build (npm test builds first). Installs are offline-first from npm's cache, which the
 * checkout's own `npm ci` and the frameworks' test project's (scripts/frameworks.cjs) filled.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { invoiceGatewayConfig, startHost, workspace, type Host, type Workspace } from '../support/mcp-gateway-harness';
import { startProviderProcess, type ProviderProcess } from '../support/provider-process';

const run = promisify(execFile);
const REPO = resolve(__dirname, '../..');
const PACKAGES = ['core', 'client', 'mcp-gateway', 'agent-frameworks'] as const;
type PackageDir = (typeof PACKAGES)[number];

let scratch: string;
const tarballs = {} as Record<PackageDir, string>;

/** An empty project that depends on the given tarballs only. */
async function projectWith(name: string, ...packages: Array<PackageDir | { spec: string }>): Promise<string> {
  const dir = join(scratch, name);
  mkdirSync(dir);
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: `scratch-${name}`, private: true, version: '1.0.0' }),
  );
  await run(
    'npm',
    [
      'install',
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      '--no-package-lock',
      ...packages.map((item) => (typeof item === 'string' ? tarballs[item] : item.spec)),
    ],
    {
      cwd: dir,
      timeout: 240_000,
      env: { ...process.env, npm_config_update_notifier: 'false' },
    },
  );
  return dir;
}

/** Every package folder under node_modules (scoped ones counted one by one). */
function installedModules(project: string): string[] {
  const found: string[] = [];
  const walk = (modules: string, prefix: string) => {
    if (!existsSync(modules)) return;
    for (const entry of readdirSync(modules)) {
      if (entry.startsWith('.')) continue;
      if (entry.startsWith('@')) walk(join(modules, entry), `${entry}/`);
      else {
        found.push(`${prefix}${entry}`);
        walk(join(modules, entry, 'node_modules'), '');
      }
    }
  };
  walk(join(project, 'node_modules'), '');
  return found.sort();
}

/** The versions this checkout tested its integrations with: each peer at its exact version in test/frameworks. */
const frameworkVersions = (): Record<string, string> => {
  const read = (path: string) =>
    JSON.parse(readFileSync(join(REPO, path), 'utf8')) as Record<string, Record<string, string>>;
  const tested = read('test/frameworks/package.json').dependencies;
  return Object.fromEntries(
    Object.keys(read('packages/agent-frameworks/package.json').peerDependencies).map((name) => [name, tested[name]]),
  );
};
const aiVersion = () => frameworkVersions().ai;
const rootVersion = (name: string) =>
  (JSON.parse(readFileSync(join(REPO, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;

/** The module settings an application may type-check with: node16 and nodenext, ES module and CommonJS, and bundler. */
const TYPECHECK_CONFIGS: Record<string, { module: string; moduleResolution: string; extension: string }> = {
  'node16-esm': { module: 'node16', moduleResolution: 'node16', extension: 'mts' },
  'node16-cjs': { module: 'node16', moduleResolution: 'node16', extension: 'cts' },
  'nodenext-esm': { module: 'nodenext', moduleResolution: 'nodenext', extension: 'mts' },
  'nodenext-cjs': { module: 'nodenext', moduleResolution: 'nodenext', extension: 'cts' },
  bundler: { module: 'esnext', moduleResolution: 'bundler', extension: 'ts' },
};

/**
 * What each docs/integrations.md section's snippet leaves to the reader, declared: the section's
 * heading, the imports it does not write, and the names it uses without defining them.
 */
const SNIPPET_CONTEXT: Record<string, { heading: string; imports: string; declared: string }> = {
  'ai-sdk': {
    heading: 'Vercel AI SDK',
    imports: `import { z } from 'zod';
import { LedgerClient, type Lookup, type ToolCall } from '@recovery-ledger/client';`,
    declared: `declare const model: Parameters<typeof generateText>[0]['model'];
declare const baseUrl: string;
declare const RUNTIME_KEY: string;
declare const runId: string;
declare const prompt: string;
declare const createInvoice: ToolCall<{ customer_id: string; amount_cents: number; currency: string }>;
declare const lookup: Lookup;`,
  },
  'openai-agents': {
    heading: 'OpenAI Agents SDK',
    imports: `import { z } from 'zod';
import type { LedgerClient, LedgeredToolPolicy, Lookup, ToolCall } from '@recovery-ledger/client';`,
    declared: `declare const ledger: LedgerClient;
declare const description: string;
declare const runId: string;
const parameters = z.object({ customer_id: z.string(), amount_cents: z.number().int(), currency: z.string() });
declare const policy: LedgeredToolPolicy;
declare const call: ToolCall<z.infer<typeof parameters>>;
declare const lookup: Lookup;`,
  },
  langchain: {
    heading: 'LangChain and LangGraph',
    imports: `import { MemorySaver } from '@langchain/langgraph';
import { z } from 'zod';
import type { LedgerClient, LedgeredToolPolicy, Lookup, ToolCallContext, ToolEnvelope } from '@recovery-ledger/client';`,
    declared: `const schema = z.object({ customer_id: z.string(), amount_cents: z.number().int(), currency: z.string() });
declare function createInvoiceAtProvider(input: z.infer<typeof schema>, attempt: ToolCallContext): Promise<ToolEnvelope>;
declare const description: string;
const model = 'openai:gpt-4.1';
const checkpointer = new MemorySaver();
declare const ledger: LedgerClient;
declare const threadId: string;
declare const policy: LedgeredToolPolicy;
declare const lookup: Lookup;`,
  },
  mastra: {
    heading: 'Mastra',
    imports: `import { z } from 'zod';
import type { LedgerClient, LedgeredToolPolicy, Lookup, ToolCall } from '@recovery-ledger/client';`,
    declared: `declare const ledger: LedgerClient;
declare const instructions: string;
const model = 'openai/gpt-4.1';
declare const description: string;
declare const runId: string;
const inputSchema = z.object({ customer_id: z.string(), amount_cents: z.number().int(), currency: z.string() });
declare const policy: LedgeredToolPolicy;
declare const call: ToolCall<z.infer<typeof inputSchema>>;
declare const lookup: Lookup;`,
  },
};

/**
 * docs/integrations.md's snippet of each integration, read from the document itself (the first
 * ts block of its section), as a module: its imports first, its statements in an async function
 * (they await), what it leaves out declared (SNIPPET_CONTEXT).
 */
function documentedSnippets(): Record<string, string> {
  const doc = readFileSync(join(REPO, 'docs/integrations.md'), 'utf8');
  return Object.fromEntries(
    Object.entries(SNIPPET_CONTEXT).map(([framework, { heading, imports, declared }]) => {
      const section = doc.split(/^## /m).find((part) => part.startsWith(`${heading}\n`));
      const code = section?.match(/```ts\n([\s\S]*?)```/)?.[1];
      if (!code) throw new Error(`docs/integrations.md has no ts snippet under "## ${heading}"`);
      const lines = code.split('\n');
      const own = lines.filter((line) => line.startsWith('import '));
      const body = lines.filter((line) => !line.startsWith('import '));
      const source = [...own, imports, declared, 'export async function documented(): Promise<void> {', ...body, '}'];
      return [framework, source.join('\n')];
    }),
  );
}

beforeAll(async () => {
  for (const dir of PACKAGES) {
    if (!existsSync(join(REPO, 'packages', dir, 'dist')))
      throw new Error(`packages/${dir}/dist is missing: npm run build first (npm test does)`);
  }
  // Under the system temp directory: module resolution from here never reaches the checkout.
  scratch = mkdtempSync(join(tmpdir(), 'ledger-packages-'));
  for (const dir of PACKAGES) {
    const { stdout } = await run(
      'npm',
      ['pack', '--json', '--pack-destination', scratch, '--workspace', `packages/${dir}`],
      { cwd: REPO, timeout: 120_000 },
    );
    const [packed] = JSON.parse(stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
    tarballs[dir] = join(scratch, packed.filename.replace(/^@/, '').replace('/', '-'));
    if (!existsSync(tarballs[dir])) tarballs[dir] = join(scratch, packed.filename);
    // What a registry would serve: the build, the manifest and the README, never the sources or tests.
    const paths = packed.files.map((file) => file.path);
    expect(paths).toEqual(expect.arrayContaining(['package.json', 'README.md']));
    expect(paths.filter((path) => !/^(dist\/|package\.json$|README\.md$|LICENSE$)/.test(path))).toEqual([]);
    // A source map would point at sources the tarball does not hold.
    expect(paths.filter((path) => path.endsWith('.map'))).toEqual([]);
  }
}, 300_000);

afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('@recovery-ledger/core, installed alone', () => {
  let project: string;

  beforeAll(async () => {
    project = await projectWith('core', 'core');
  });

  it('installs nothing else, and decides', async () => {
    expect(installedModules(project)).toEqual(['@recovery-ledger/core']);
    const script = `
      const { decide, initialState } = require('@recovery-ledger/core');
      const now = new Date().toISOString();
      const fact = { type: 'AttemptDispatched', data: { attempt: 1, input_hash: 'sha256:aa' } };
      const decision = decide(initialState(), { fact, event_id: 'e1', now });
      console.log(JSON.stringify({ kind: decision.kind, code: decision.code }));
    `;
    const { stdout } = await run(process.execPath, ['-e', script], { cwd: project });
    // A dispatch before any plan is refused by the rules themselves, with its stable code.
    expect(JSON.parse(stdout)).toEqual({ kind: 'refused', code: 'STEP_NOT_PLANNED' });
  });

  it('is imported by its two entry points, never by a file inside it', async () => {
    const script = `
      const envelope = require('@recovery-ledger/core/envelope');
      let deep;
      try { require('@recovery-ledger/core/domain/decide'); deep = 'loaded'; } catch (error) { deep = error.code; }
      console.log(JSON.stringify({ validates: typeof envelope.validateEnvelope, decides: typeof envelope.decide, deep }));
    `;
    const { stdout } = await run(process.execPath, ['-e', script], { cwd: project });
    expect(JSON.parse(stdout)).toEqual({
      validates: 'function',
      decides: 'undefined',
      deep: 'ERR_PACKAGE_PATH_NOT_EXPORTED',
    });
  });
});

describe('@recovery-ledger/client, installed alone', () => {
  let project: string;
  let ledger: LedgerProcess;
  let provider: ProviderProcess;

  beforeAll(async () => {
    [project, ledger, provider] = await Promise.all([
      projectWith('client', 'client'),
      startLedger(),
      startProviderProcess(15_000, ['--no-idempotency']),
    ]);
  }, 300_000);

  afterAll(async () => {
    await provider?.stop();
    await ledger?.stop();
    ledger?.cleanup();
  });

  it('installs with no other module', () => {
    expect(installedModules(project)).toEqual(['@recovery-ledger/client']);
  });

  it('loads from an ES module and from CommonJS, with its types beside each', async () => {
    const esm = `import { LedgerClient, executeWrite, LedgerWorker } from '@recovery-ledger/client';
      console.log([LedgerClient, executeWrite, LedgerWorker].map((value) => typeof value).join(','));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', esm], { cwd: project });
    expect(stdout.trim()).toBe('function,function,function');
    const root = join(project, 'node_modules/@recovery-ledger/client');
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      dependencies?: object;
      exports: Record<string, any>;
    };
    expect(manifest.dependencies).toBeUndefined();
    for (const condition of ['import', 'require'] as const) {
      const target = manifest.exports['.'][condition];
      expect(existsSync(join(root, target.types))).toBe(true);
      expect(existsSync(join(root, target.default))).toBe(true);
    }
  });

  it('drives executeWrite, verify and LedgerWorker against the service: one invoice per step, even after a timeout that committed', async () => {
    // The provider's idempotency is off: a second create for a step would be a second invoice.
    const fault = await fetch(`${provider.url}/__faults`, {
      method: 'POST',
      body: JSON.stringify({ fault: { kind: 'accept-then-timeout' }, operation_ref: 'pack/timed-out', times: 1 }),
    });
    expect(fault.ok).toBe(true);
    writeFileSync(join(project, 'drive.cjs'), DRIVER);
    const { stdout } = await run(process.execPath, ['drive.cjs', ledger.baseUrl, provider.url], {
      cwd: project,
      timeout: 120_000,
    });
    const report = JSON.parse(stdout.trim().split('\n').pop() as string);

    expect(report.first).toMatchObject({ kind: 'recorded', toolCalled: true, status: 'succeeded' });
    // The same step again: the ledger answers the proven success; the tool is not called.
    expect(report.again).toMatchObject({ toolCalled: false, status: 'succeeded' });
    // The provider committed but never answered: unknown, then verified by operation_ref.
    expect(report.timedOut).toMatchObject({
      toolCalled: true,
      status: 'verifying',
      directive: { next_action: 'verify_operation' },
    });
    expect(report.verified).toMatchObject({ kind: 'recorded', outcome: 'found_committed' });
    // The feed's steps, run by LedgerWorker.
    expect(report.workerStates).toEqual(['succeeded', 'succeeded', 'succeeded']);

    const stats = (await (await fetch(`${provider.url}/__stats`)).json()) as { created: Record<string, number> };
    expect(stats.created).toEqual({
      'pack/one': 1,
      'pack/timed-out': 1,
      'pack/feed-1': 1,
      'pack/feed-2': 1,
      'pack/feed-3': 1,
    });
  }, 180_000);
});

describe('@recovery-ledger/mcp-gateway, installed with the client', () => {
  let project: string;
  let ledger: LedgerProcess;
  let space: Workspace;
  let host: Host | undefined;

  beforeAll(async () => {
    [project, ledger] = await Promise.all([projectWith('gateway', 'client', 'mcp-gateway'), startLedger()]);
    space = workspace();
  }, 300_000);

  afterAll(async () => {
    await host?.close();
    await ledger?.stop();
    ledger?.cleanup();
    space?.cleanup();
  });

  it('installs the client, the MCP SDK and the configuration validator, and none of the server', () => {
    const modules = installedModules(project);
    expect(modules).toEqual(
      expect.arrayContaining([
        '@recovery-ledger/mcp-gateway',
        '@recovery-ledger/client',
        '@modelcontextprotocol/sdk',
        'zod',
      ]),
    );
    expect(
      modules.filter((name) =>
        /^(@nestjs\/|better-sqlite3$|@eventstore\/|@secretlint\/|pino$|@recovery-ledger\/core$)/.test(name),
      ),
    ).toEqual([]);
  });

  it('serves a real MCP client from its own bin: a write runs through the ledger, once', async () => {
    space.writeConfig(invoiceGatewayConfig(space, { ledgerUrl: ledger.baseUrl }));
    const bin = join(project, 'node_modules/.bin/recovery-ledger-mcp-gateway');
    host = await startHost(space.configFile, {}, { command: bin, args: ['--config', space.configFile] });
    const tools = await host.client.listTools();
    expect(tools.tools.map((tool) => tool.name)).toEqual(
      expect.arrayContaining(['create_invoice', 'verify_operation', 'operation_status']),
    );

    const ref = 'pack-gateway/invoice-1';
    const args = { operation_ref: ref, customer_id: 'cus_1', amount_cents: 1200, currency: 'EUR' };
    const first = await host.call('create_invoice', args);
    expect(first.structuredContent).toMatchObject({ ok: true, commit_state: 'committed', operation_ref: ref });
    const again = await host.call('create_invoice', args);
    expect(again.structuredContent).toMatchObject({ ok: true, operation_ref: ref });
    expect(space.createCalls(ref)).toBe(1);
    expect(space.invoicesFor(ref)).toBe(1);
  }, 120_000);

  it('refuses to start without a configuration, with the usage exit code', async () => {
    const bin = join(project, 'node_modules/.bin/recovery-ledger-mcp-gateway');
    const failed = await run(bin, [], { cwd: project }).then(
      () => ({ code: 0, stderr: '' }),
      (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
    );
    expect(failed).toEqual({ code: 2, stderr: expect.stringContaining('--config is required') });
  });
});

describe('@recovery-ledger/agent-frameworks, installed with the client and the AI SDK', () => {
  let project: string;
  let ledger: LedgerProcess;
  let provider: ProviderProcess;

  beforeAll(async () => {
    [project, ledger, provider] = await Promise.all([
      projectWith('frameworks', 'client', 'agent-frameworks', { spec: `ai@${aiVersion()}` }),
      startLedger(),
      startProviderProcess(15_000, ['--no-idempotency']),
    ]);
  }, 300_000);

  afterAll(async () => {
    await provider?.stop();
    await ledger?.stop();
    ledger?.cleanup();
  });

  it('installs the client and the framework it is used with, no other framework and none of the server', () => {
    const modules = installedModules(project);
    expect(modules).toEqual(
      expect.arrayContaining(['@recovery-ledger/agent-frameworks', '@recovery-ledger/client', 'ai']),
    );
    expect(
      modules.filter((name) =>
        /^(@openai\/agents|langchain$|@langchain\/|@mastra\/|@nestjs\/|better-sqlite3$|@recovery-ledger\/core$)/.test(
          name,
        ),
      ),
    ).toEqual([]);
  });

  it('runs a ledgered AI SDK tool against the service: the same call twice is one invoice; a framework not installed is named', async () => {
    writeFileSync(join(project, 'ai-tool.cjs'), AI_SDK_DRIVER);
    const { stdout } = await run(process.execPath, ['ai-tool.cjs', ledger.baseUrl, provider.url], {
      cwd: project,
      timeout: 120_000,
    });
    const report = JSON.parse(stdout.trim().split('\n').pop() as string);
    expect(report.first).toMatchObject({ ok: true, status: 'succeeded', operation_ref: report.ref });
    expect(report.again).toMatchObject({ ok: true, status: 'succeeded', operation_ref: report.ref });
    expect(report.langchain).toMatch(/Cannot find module '@langchain\/core/);
    const stats = (await (await fetch(`${provider.url}/__stats`)).json()) as { created: Record<string, number> };
    expect(stats.created).toEqual({ [report.ref]: 1 });
  }, 180_000);
});

describe('@recovery-ledger/agent-frameworks in ES-module and CommonJS applications, with the four frameworks', () => {
  let project: string;
  let ledger: LedgerProcess;
  let provider: ProviderProcess;

  beforeAll(async () => {
    const versions = frameworkVersions();
    [project, ledger, provider] = await Promise.all([
      projectWith(
        'frameworks-all',
        'client',
        'agent-frameworks',
        ...Object.entries(versions).map(([name, version]) => ({ spec: `${name}@${version}` })),
        { spec: `zod@${rootVersion('zod')}` },
        { spec: `typescript@${rootVersion('typescript')}` },
        { spec: `@types/node@${rootVersion('@types/node')}` },
      ),
      startLedger(),
      startProviderProcess(15_000, ['--no-idempotency']),
    ]);
  }, 600_000);

  afterAll(async () => {
    await provider?.stop();
    await ledger?.stop();
    ledger?.cleanup();
  });

  const SURFACES: Record<FrameworkDriver, string> = {
    'ai-sdk': 'tool-approval-request',
    'openai-agents': 'interruption',
    langchain: 'interrupt',
    mastra: 'suspended',
  };

  it.each(
    (['ai-sdk', 'openai-agents', 'langchain', 'mastra'] as const).flatMap((framework) =>
      (['esm', 'cjs', 'mixed'] as const).map((format) => [framework, format] as const),
    ),
  )(
    '%s in a %s application, run by its own test model: an approval-gated call asks approval and the ledger holds it; a premature verification is waited out: one invoice',
    async (framework, format) => {
      const file = `${framework}-${format}.${format === 'cjs' ? 'cjs' : 'mjs'}`;
      writeFileSync(join(project, file), frameworkDriver(framework, format));
      const tag = `${framework}-${format}`;
      const { stdout } = await run(process.execPath, [file, ledger.baseUrl, provider.url, tag], {
        cwd: project,
        timeout: 240_000,
      });
      const report = JSON.parse(stdout.trim().split('\n').pop() as string);
      // Asked together, so a failure shows both: the approval the ledger holds, the write it verified.
      expect({ approval: report.approval, write: report.write }).toEqual({
        approval: { surface: SURFACES[framework], ledger: 'awaiting_approval' },
        write: { ok: true, status: 'succeeded' },
      });
      // AI SDK 7 deprecates the tool's needsApproval but still reads it: without toolApproval it asks the same.
      if (framework === 'ai-sdk') expect(report.legacy).toEqual(report.approval);
      const stats = (await (await fetch(`${provider.url}/__stats`)).json()) as {
        created: Record<string, number>;
        create_requests: Record<string, number>;
      };
      // The 502 was one request that wrote nothing; the second, sent once verified, is the invoice.
      expect(stats.create_requests[report.write_ref]).toBe(2);
      expect(stats.created[report.write_ref]).toBe(1);
      expect(stats.create_requests[report.approval_ref]).toBeUndefined();
    },
    150_000,
  );

  /**
   * Every configuration's project, type-checked by one `tsc --build` of them all: the build reads
   * each installed declaration file once for all five programs (the frameworks' are most of what
   * each reads), where five `tsc -p` would each read them again. Each project is still its own
   * program with its own module settings, and its errors are reported under its own folder.
   */
  let typeChecked: Promise<string> | undefined;
  const typeCheckAll = (): Promise<string> =>
    (typeChecked ??= (async () => {
      const dirs = Object.entries(TYPECHECK_CONFIGS).map(([config, { module, moduleResolution, extension }]) => {
        const dir = `typecheck-${config}`;
        mkdirSync(join(project, dir));
        for (const [framework, source] of Object.entries(documentedSnippets()))
          writeFileSync(join(project, dir, `${framework}.${extension}`), source);
        writeFileSync(
          join(project, dir, 'tsconfig.json'),
          JSON.stringify({
            compilerOptions: {
              module,
              moduleResolution,
              target: 'es2022',
              strict: true,
              skipLibCheck: true,
              noEmit: true,
              types: ['node'],
            },
            include: [`*.${extension}`],
          }),
        );
        return dir;
      });
      const tsc = join(project, 'node_modules/typescript/bin/tsc');
      return run(process.execPath, [tsc, '--build', ...dirs, '--pretty', 'false'], {
        cwd: project,
        timeout: 240_000,
      }).then(
        ({ stdout }) => stdout,
        (error: { stdout?: string }) => error.stdout ?? String(error),
      );
    })());

  it.each(Object.keys(TYPECHECK_CONFIGS))(
    "each integration's documented snippet type-checks against the installed declarations under %s",
    async (config) => {
      const output = await typeCheckAll();
      // An error tsc names no file of (a setting it refuses, a project it cannot read) fails every configuration.
      const lines = output.split('\n').filter((line) => / error TS\d+/.test(line));
      const attributed = lines.map((line) =>
        /^typecheck-([\w-]+)\/([\w-]+)\.[cm]?ts\(\d+,\d+\): error (TS\d+)/.exec(line),
      );
      expect(lines.filter((_, index) => attributed[index] === null)).toEqual([]);
      const errors = attributed
        .filter((match): match is RegExpExecArray => match?.[1] === config)
        .map(([, , file, code]) => `${file} ${code}`);
      // Under node16, CommonJS may not import a package that ships ES modules only (ai 7, @mastra/core's
      // agent entry): TypeScript's TS1479 on the framework's own import, whatever the integration ships.
      expect(errors).toEqual(config === 'node16-cjs' ? ['ai-sdk TS1479', 'mastra TS1479'] : []);
    },
    // The first configuration's test waits on the one build of all five.
    300_000,
  );
});

/** A runtime's AI SDK tool, in plain JavaScript against the installed packages, executed as the SDK would. */
const AI_SDK_DRIVER = String.raw`
const { jsonSchema } = require('ai');
const { LedgerClient, callHttpTool } = require('@recovery-ledger/client');
const { ledgeredTool } = require('@recovery-ledger/agent-frameworks/ai-sdk');
const [ledgerUrl, providerUrl] = process.argv.slice(2);

const createInvoice = ledgeredTool({
  ledger: new LedgerClient({ baseUrl: ledgerUrl, timeoutMs: 10000 }),
  name: 'create_invoice',
  runId: 'pack-frameworks',
  policy: { max_attempts: 3 },
  inputSchema: jsonSchema({
    type: 'object',
    properties: { customer_id: { type: 'string' }, amount_cents: { type: 'integer' } },
    required: ['customer_id', 'amount_cents'],
  }),
  call: (body, context) =>
    callHttpTool(
      { url: providerUrl + '/invoices', method: 'POST', body: { ...body, currency: 'EUR' }, timeoutMs: 1500, idempotencyHeader: 'Idempotency-Key', signal: context.signal },
      { operationRef: context.idempotencyKey, sideEffect: context.sideEffect, verificationTool: 'get_invoice_by_operation_ref', evidenceRef: (answer) => answer && answer.id },
    ),
  lookup: async (ref) => {
    const response = await fetch(providerUrl + '/invoices?operation_ref=' + encodeURIComponent(ref));
    const invoice = (await response.json()).items.find((item) => item.operation_ref === ref);
    return invoice ? { found: true, evidenceRef: invoice.id } : { found: false };
  },
});
const summary = (output) => ({ ok: output.ok, status: output.status, operation_ref: output.operation_ref });

async function main() {
  const input = { customer_id: 'cus_1', amount_cents: 1200 };
  const first = summary(await createInvoice.execute(input, { toolCallId: 'call-1', messages: [] }));
  // A replayed step: a new tool-call id, the same operation_ref.
  const again = summary(await createInvoice.execute(input, { toolCallId: 'call-2', messages: [] }));
  let langchain = '';
  try {
    require('@recovery-ledger/agent-frameworks/langchain');
  } catch (error) {
    langchain = error.message.split('\n')[0];
  }
  console.log(JSON.stringify({ ref: first.operation_ref, first, again, langchain }));
}

main().catch((error) => {
  console.error(error && error.stack ? error.stack : String(error));
  process.exit(1);
});
`;

/**
 * The runtime's own script, in plain JavaScript against the installed package: the invoice tool
 * and its lookup written once, then executeWrite, verify and a LedgerWorker on the feed.
 */
const DRIVER = String.raw`
const { LedgerClient, LedgerWorker, callHttpTool, executeWrite, verify } = require('@recovery-ledger/client');
const [ledgerUrl, providerUrl] = process.argv.slice(2);
const ledger = new LedgerClient({ baseUrl: ledgerUrl, timeoutMs: 10000 });
const input = { customer_id: 'cus_1', amount_cents: 1200, currency: 'EUR' };

const createInvoice = (body, context) =>
  callHttpTool(
    { url: providerUrl + '/invoices', method: 'POST', body, timeoutMs: 1500, idempotencyHeader: 'Idempotency-Key', signal: context.signal },
    { operationRef: context.idempotencyKey, sideEffect: context.sideEffect, verificationTool: 'get_invoice_by_operation_ref', evidenceRef: (answer) => answer && answer.id },
  );
const lookup = async (ref) => {
  const response = await fetch(providerUrl + '/invoices?operation_ref=' + encodeURIComponent(ref));
  if (!response.ok) throw new Error('lookup answered ' + response.status);
  const invoice = (await response.json()).items.find((item) => item.operation_ref === ref);
  return invoice ? { found: true, evidenceRef: invoice.id } : { found: false };
};
const step = (operationRef) => ({ operationRef, runId: 'pack', tool: 'create_invoice', input });
const summary = (outcome) => ({ kind: outcome.kind, toolCalled: outcome.toolCalled, status: outcome.status, directive: outcome.directive });

async function main() {
  const first = summary(await executeWrite(ledger, step('pack/one'), createInvoice));
  const again = summary(await executeWrite(ledger, step('pack/one'), createInvoice));
  const timedOut = summary(await executeWrite(ledger, step('pack/timed-out'), createInvoice));
  const checked = await verify(ledger, { operationRef: 'pack/timed-out', tool: 'create_invoice' }, lookup);
  const verified = { kind: checked.kind, outcome: checked.outcome };

  const feed = ['pack/feed-1', 'pack/feed-2', 'pack/feed-3'];
  for (const ref of feed) await ledger.startStep(step(ref));
  const stop = new AbortController();
  const worker = new LedgerWorker(ledger, { tools: { create_invoice: { call: createInvoice, lookup } }, concurrency: 2, waitMs: 500, signal: stop.signal });
  const running = worker.run();
  let workerStates = [];
  for (let round = 0; round < 200; round++) {
    workerStates = await Promise.all(feed.map(async (ref) => (await ledger.getOperation(ref)).status));
    if (workerStates.every((status) => status === 'succeeded')) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  stop.abort();
  await running;
  console.log(JSON.stringify({ first, again, timedOut, verified, workerStates }));
}

main().catch((error) => {
  console.error(error && error.stack ? error.stack : String(error));
  process.exit(1);
});
`;

type FrameworkDriver = 'ai-sdk' | 'openai-agents' | 'langchain' | 'mastra';

/** What each framework's driver imports (alias, module), besides what every driver imports. */
const FRAMEWORK_DRIVERS: Record<FrameworkDriver, Array<[string, string]>> = {
  'ai-sdk': [
    ['ai', 'ai'],
    ['aiTest', 'ai/test'],
    ['wrappers', '@recovery-ledger/agent-frameworks/ai-sdk'],
  ],
  'openai-agents': [
    ['agents', '@openai/agents'],
    ['wrappers', '@recovery-ledger/agent-frameworks/openai-agents'],
  ],
  langchain: [
    ['langchain', 'langchain'],
    ['langgraph', '@langchain/langgraph'],
    ['wrappers', '@recovery-ledger/agent-frameworks/langchain'],
  ],
  mastra: [
    ['aiTest', 'ai/test'],
    ['mastraAgent', '@mastra/core/agent'],
    ['mastraCore', '@mastra/core/mastra'],
    ['mastraStorage', '@mastra/core/storage'],
    ['wrappers', '@recovery-ledger/agent-frameworks/mastra'],
  ],
};

/**
 * How an application loads its modules: `esm` imports everything, `cjs` requires everything, and
 * `mixed` is an ES module that imports the client but requires the integration and its framework
 * (through createRequire), so two copies of the client run in one process: the application's ES
 * build, whose LedgerClient throws the ledger's answers, and the CommonJS build the integration
 * catches them with.
 */
type ModuleFormat = 'esm' | 'cjs' | 'mixed';

/**
 * One framework's application, in plain JavaScript against the installed packages: the same body,
 * only the way it loads its modules differs (ModuleFormat). It runs the framework with the
 * framework's own test model (the AI SDK's MockLanguageModelV4 for the AI SDK and Mastra,
 * LangChain's FakeToolCallingModel, a scripted Model for the OpenAI Agents SDK, which ships none),
 * first an approval-gated write, then a write whose first create answers 502 (an unknown outcome:
 * verified, and a not_found waited out until the window ends).
 */
function frameworkDriver(framework: FrameworkDriver, format: ModuleFormat): string {
  const modules: Array<[string, string]> = [
    ['zodModule', 'zod'],
    ['client', '@recovery-ledger/client'],
    ...FRAMEWORK_DRIVERS[framework],
  ];
  const imports = (name: string) => format === 'esm' || (format === 'mixed' && name === '@recovery-ledger/client');
  const header = modules
    .map(([alias, name]) =>
      imports(name) ? `import * as ${alias} from '${name}';` : `const ${alias} = require('${name}');`,
    )
    .join('\n');
  const loader =
    format === 'mixed'
      ? "import { createRequire } from 'node:module';\nconst require = createRequire(import.meta.url);\n"
      : '';
  return `${loader}${header}\nconst FRAMEWORK = '${framework}';\n${DRIVER_BODY}`;
}

const DRIVER_BODY = String.raw`
const { z } = zodModule;
const { LedgerClient, callHttpTool, operationRefFor } = client;
const [ledgerUrl, providerUrl, tag] = process.argv.slice(2);
const ledger = new LedgerClient({ baseUrl: ledgerUrl, timeoutMs: 10000 });
const schema = z.object({ customer_id: z.string(), amount_cents: z.number().int(), currency: z.string() });
const input = { customer_id: 'cus_pack', amount_cents: 1200, currency: 'EUR' };
const call = (body, context) =>
  callHttpTool(
    { url: providerUrl + '/invoices', method: 'POST', body, timeoutMs: 1500, idempotencyHeader: 'Idempotency-Key', signal: context.signal },
    { operationRef: context.idempotencyKey, sideEffect: context.sideEffect, verificationTool: 'get_invoice_by_operation_ref', evidenceRef: (answer) => answer && answer.id },
  );
const lookup = async (ref) => {
  const response = await fetch(providerUrl + '/invoices?operation_ref=' + encodeURIComponent(ref));
  if (!response.ok) throw new Error('lookup answered ' + response.status);
  const invoice = (await response.json()).items.find((item) => item.operation_ref === ref);
  return invoice ? { found: true, evidenceRef: invoice.id } : { found: false };
};
const options = (runId, approval) => ({
  ledger, name: 'create_invoice', runId, call, lookup, callWindowMs: 2000,
  policy: { max_attempts: 3, consistency_window_ms: 500, approval_required: approval },
});
const refOf = (runId) => operationRefFor({ runId, tool: 'create_invoice', step: 1 });
const statusOf = async (ref) => {
  try { return (await ledger.getOperation(ref)).status; } catch (error) { return 'error ' + error.code; }
};
const usage = { inputTokens: { total: 1, noCache: 1 }, outputTokens: { total: 1, text: 1 } };
const aiModel = () => {
  let turn = 0;
  return new aiTest.MockLanguageModelV4({
    doGenerate: async () => turn++ === 0
      ? { content: [{ type: 'tool-call', toolCallId: 'call-1', toolName: 'create_invoice', input: JSON.stringify(input) }], finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [] }
      : { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] },
  });
};

/** Runs the framework once over one create_invoice call: what its approval surface showed, and the tool's output. */
const RUNS = {
  // AI SDK 7's approval API (toolApproval), or, with legacy, the tool's deprecated needsApproval alone.
  'ai-sdk': async (runId, approval, legacy) => {
    const tools = { create_invoice: wrappers.ledgeredTool({ ...options(runId, approval), inputSchema: schema }) };
    const toolApproval = legacy ? {} : { toolApproval: wrappers.ledgerToolApproval(tools) };
    const result = await ai.generateText({ model: aiModel(), tools, ...toolApproval, prompt: 'Invoice.', stopWhen: ai.stepCountIs(3) });
    const output = result.steps.flatMap((step) => step.toolResults)[0]?.output;
    const asked = result.content.some((part) => part.type === 'tool-approval-request');
    return { surface: asked ? 'tool-approval-request' : 'none', output };
  },
  'openai-agents': async (runId, approval) => {
    agents.setTracingDisabled(true);
    let turn = 0;
    const model = {
      getResponse: async () => turn++ === 0
        ? { usage: new agents.Usage(), output: [{ type: 'function_call', callId: 'call-1', name: 'create_invoice', arguments: JSON.stringify(input), status: 'completed' }] }
        : { usage: new agents.Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }] },
      getStreamedResponse: async function* () { throw new Error('not streamed'); },
    };
    const tool = wrappers.ledgeredAgentsTool({ ...options(runId, approval), description: 'Creates an invoice.', parameters: schema });
    const result = await agents.run(new agents.Agent({ name: 'billing', model, tools: [tool] }), 'Invoice.', { maxTurns: 3 });
    const item = result.newItems.find((entry) => entry.type === 'tool_call_output_item');
    return { surface: result.interruptions.length > 0 ? 'interruption' : 'none', output: item && item.customData && item.customData.ledger };
  },
  langchain: async (runId, approval) => {
    const tool = langchain.tool((value) => call(value, wrappers.ledgerAttempt()), { name: 'create_invoice', description: 'Creates an invoice.', schema });
    const agent = langchain.createAgent({
      model: new langchain.FakeToolCallingModel({ toolCalls: [[{ name: 'create_invoice', args: input, id: 'call-1', type: 'tool_call' }], []] }),
      tools: [tool],
      middleware: [wrappers.ledgerMiddleware({ create_invoice: options(runId, approval) })],
      checkpointer: new langgraph.MemorySaver(),
    });
    const state = await agent.invoke({ messages: [{ role: 'user', content: 'Invoice.' }] }, { configurable: { thread_id: runId } });
    const answer = state.messages.find((message) => message.getType() === 'tool');
    const interrupted = Array.isArray(state.__interrupt__) && state.__interrupt__.length > 0;
    const output = answer && { ok: answer.artifact.ok, status: await statusOf(refOf(runId)) };
    return { surface: interrupted ? 'interrupt' : 'none', output };
  },
  mastra: async (runId, approval) => {
    const tool = wrappers.ledgeredMastraTool({ ...options(runId, approval), description: 'Creates an invoice.', inputSchema: schema });
    const agent = new mastraAgent.Agent({ id: 'invoicer', name: 'invoicer', instructions: 'Invoice.', model: aiModel(), tools: { create_invoice: tool } });
    const mastra = new mastraCore.Mastra({ agents: { invoicer: agent }, storage: new mastraStorage.InMemoryStore(), logger: false });
    const result = await mastra.getAgent('invoicer').generate('Invoice.', { maxSteps: 3 });
    const output = result.toolResults[0] && result.toolResults[0].payload.result;
    return { surface: result.finishReason === 'suspended' ? 'suspended' : 'none', output };
  },
};

const settle = async (promise) => {
  try { return await promise; } catch (error) { return { surface: 'threw ' + (error && (error.code || error.message)), output: undefined }; }
};

async function main() {
  const approvalRun = 'pack-' + tag + '-approval';
  const asked = await settle(RUNS[FRAMEWORK](approvalRun, true));
  const approval = { surface: asked.surface, ledger: await statusOf(refOf(approvalRun)) };
  let legacy;
  if (FRAMEWORK === 'ai-sdk') {
    const legacyRun = approvalRun + '-legacy';
    const legacyAsked = await settle(RUNS[FRAMEWORK](legacyRun, true, true));
    legacy = { surface: legacyAsked.surface, ledger: await statusOf(refOf(legacyRun)) };
  }

  const writeRun = 'pack-' + tag + '-write';
  await fetch(providerUrl + '/__faults', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ fault: { kind: 'bad-gateway' }, operation_ref: refOf(writeRun) }) });
  const wrote = await settle(RUNS[FRAMEWORK](writeRun, false));
  const write = wrote.output ? { ok: wrote.output.ok, status: wrote.output.status } : { error: wrote.surface };
  console.log(JSON.stringify({ approval, legacy, write, approval_ref: refOf(approvalRun), write_ref: refOf(writeRun) }));
}

main().catch((error) => {
  console.error(error && error.stack ? error.stack : String(error));
  process.exit(1);
});
`;
