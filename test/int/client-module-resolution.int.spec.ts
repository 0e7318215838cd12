/**
 * `@recovery-ledger/client` as another project sees it: a consumer that depends on the package
 * (linked into its node_modules, as `npm install ./packages/client` does) imports the client and
 * is type-checked under each TypeScript moduleResolution: node10 reads `types`, the others the
 * `exports` conditions (require → index.d.ts, import → index.d.mts). Needs the build (npm test
 * builds first).
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import ts from 'typescript';

const ROOT = resolve(__dirname, '../..');
/** Where the consumer's link to the client resolves (TypeScript follows it to the real path). */
const CLIENT = join(ROOT, 'packages/client/');

const CONSUMER = `
import { LedgerClient, executeWrite, normalizeMcpToolResult, type ToolCall } from '@recovery-ledger/client';

const ledger: LedgerClient = new LedgerClient({ baseUrl: 'http://127.0.0.1:3000' });
const call: ToolCall<{ amount: number }> = async () => ({
  ok: true, operation_ref: 'run_1/step_1', commit_state: 'committed', result: {}, verification: { checked_at: new Date().toISOString() },
});
export const run = () => executeWrite(ledger, { operationRef: 'run_1/step_1', runId: 'run_1', tool: 'create_invoice', input: { amount: 1 } }, call);
export const normalize = normalizeMcpToolResult;
`;

const SETTINGS: Array<[string, ts.CompilerOptions]> = [
  ['node10', { moduleResolution: ts.ModuleResolutionKind.Node10, module: ts.ModuleKind.CommonJS }],
  ['node16', { moduleResolution: ts.ModuleResolutionKind.Node16, module: ts.ModuleKind.Node16 }],
  ['nodenext', { moduleResolution: ts.ModuleResolutionKind.NodeNext, module: ts.ModuleKind.NodeNext }],
  ['bundler', { moduleResolution: ts.ModuleResolutionKind.Bundler, module: ts.ModuleKind.ESNext }],
];

let consumer: string;

beforeAll(() => {
  if (!existsSync(join(ROOT, 'packages/client/dist/index.d.ts')))
    throw new Error('dist/ is missing: npm run build first');
  consumer = mkdtempSync(join(tmpdir(), 'ledger-client-consumer-'));
  mkdirSync(join(consumer, 'node_modules', '@recovery-ledger'), { recursive: true });
  symlinkSync(join(ROOT, 'packages/client'), join(consumer, 'node_modules', '@recovery-ledger', 'client'), 'dir');
  writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true }));
  writeFileSync(join(consumer, 'index.ts'), CONSUMER);
});

afterAll(() => {
  if (consumer) rmSync(consumer, { recursive: true, force: true });
});

describe('@recovery-ledger/client from another project', () => {
  it.each(SETTINGS)('type-checks under moduleResolution %s', (_name, options) => {
    const program = ts.createProgram([join(consumer, 'index.ts')], {
      ...options,
      target: ts.ScriptTarget.ES2022,
      lib: ['lib.es2022.d.ts'],
      strict: true,
      noEmit: true,
      // The client's own declarations are checked too, not only the consumer's use of them.
      skipLibCheck: false,
      types: ['node'],
      typeRoots: [join(ROOT, 'node_modules/@types')],
    });
    // The consumer and every declaration file of the client's, each checked whole; Node's and the ES
    // library's declarations are read for what these use, not checked whole once per setting.
    const checked = program
      .getSourceFiles()
      .filter((file) => file.fileName === join(consumer, 'index.ts') || file.fileName.startsWith(CLIENT));
    const diagnostics = [
      ...program.getOptionsDiagnostics(),
      ...program.getGlobalDiagnostics(),
      ...checked.flatMap((file) => [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)]),
    ].map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    expect(checked.filter((file) => file.fileName.startsWith(CLIENT))).not.toEqual([]);
    expect(diagnostics).toEqual([]);
    const resolved = program
      .getSourceFiles()
      .map((file) => file.fileName)
      .filter((name) => /\/packages\/client\/dist\/index\.d\.m?ts$/.test(name));
    expect(resolved).toHaveLength(1);
  });
});
