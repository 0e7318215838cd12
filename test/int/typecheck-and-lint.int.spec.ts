/**
 * npm test type-checks and lints in one process over one program (scripts/typecheck-and-lint.cjs):
 * the linter's type-aware rules are handed the program the type check built. Checked on a tiny
 * tree laid out like this one, with the repository's own eslint.config.mjs and script, so a change
 * that left the linter without types, or the type check without a say in the exit code, fails here.
 * A tree with nothing to say passing is npm test's own first step, on this checkout.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');
let tree: string;

function check(source: string): { status: number | null; output: string } {
  writeFileSync(join(tree, 'src/planted.ts'), source);
  const run = spawnSync(process.execPath, [join(ROOT, 'scripts/typecheck-and-lint.cjs'), tree], { encoding: 'utf8' });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

beforeAll(() => {
  tree = mkdtempSync(join(tmpdir(), 'typecheck-and-lint-'));
  mkdirSync(join(tree, 'src'));
  copyFileSync(join(ROOT, 'eslint.config.mjs'), join(tree, 'eslint.config.mjs'));
  // The configuration's imports (typescript-eslint, @eslint/js) resolve from the tree, as in the checkout.
  symlinkSync(join(ROOT, 'node_modules'), join(tree, 'node_modules'), 'dir');
  writeFileSync(
    join(tree, 'tsconfig.json'),
    JSON.stringify({
      // The ES library alone: the DOM's declarations would be most of what the program reads.
      compilerOptions: { strict: true, module: 'commonjs', target: 'es2022', lib: ['es2022'], types: [] },
      include: ['src'],
    }),
  );
});

afterAll(() => rmSync(tree, { recursive: true, force: true }));

describe('scripts/typecheck-and-lint.cjs', () => {
  it('reports a type error, and fails', () => {
    const result = check("export const count: number = 'one';\n");
    expect(result.status).toBe(1);
    expect(result.output).toContain(
      "src/planted.ts(1,14): error TS2322: Type 'string' is not assignable to type 'number'.",
    );
    expect(result.output).toContain('The type check failed.');
    expect(result.output).not.toContain('The linter failed.');
  });

  it('runs the type-aware rules on the program it checked: a promise nobody awaits fails', () => {
    const result = check(
      'async function send(): Promise<void> {}\nexport function sendAndForget(): void {\n  send();\n}\n',
    );
    expect(result.status).toBe(1);
    expect(result.output).toMatch(/3:3 +error +Promises must be awaited.*@typescript-eslint\/no-floating-promises/);
    expect(result.output).toContain('The linter failed.');
    expect(result.output).not.toContain('The type check failed.');
  });
});
