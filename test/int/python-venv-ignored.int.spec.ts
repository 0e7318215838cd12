/**
 * docs/sdk-python.md makes a `.venv` in the checkout; what pip puts there (JavaScript and JSON among
 * it) is nobody's code here, and `npm test`'s format check, lint and boundary check must pass over
 * it. Asked of the tools themselves, with the repository's own configuration.
 */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');
const inVenv = [
  '.venv/lib/python3.12/site-packages/pip/_vendor/x.js',
  '.venv/lib/python3.12/site-packages/jupyterlab/static/package.json',
];

/** The tools are ES modules Jest's VM cannot import: each is asked in a Node process of its own. */
function ask(script: string, file: string): string {
  const run = spawnSync(process.execPath, ['-e', script, resolve(ROOT, file)], { cwd: ROOT, encoding: 'utf8' });
  if (run.status !== 0) throw new Error(run.stderr);
  return run.stdout.trim();
}

describe('a Python virtual environment in the checkout', () => {
  it.each(inVenv)('prettier passes over %s', (file) => {
    const ignored = ask(
      "require('prettier').getFileInfo(process.argv[1], { ignorePath: '.prettierignore' }).then((i) => console.log(i.ignored))",
      file,
    );
    expect(ignored).toBe('true');
  });

  it.each(inVenv.filter((file) => file.endsWith('.js')))('eslint passes over %s', (file) => {
    const ignored = ask(
      "new (require('eslint').ESLint)().isPathIgnored(process.argv[1]).then((ignored) => console.log(ignored))",
      file,
    );
    expect(ignored).toBe('true');
  });

  it('dependency-cruiser excludes it', () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const config = require(resolve(ROOT, '.dependency-cruiser.cjs')) as { options: { exclude: { path: string } } };
    expect(new RegExp(config.options.exclude.path).test('.venv/lib/python3.12/site-packages/x.js')).toBe(true);
  });
});
