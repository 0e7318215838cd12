import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * The compiled submit validator (src/http/submit-body.validator.ts) against the DTOs it stands in
 * for: generated bodies, valid and one mutation away, answered by both paths of the submit pipe.
 * The checks run in a Node process of their own (./submit-body-differential.ts says why).
 */
const ROOT = join(__dirname, '..', '..', '..');

it('the compiled submit validator answers every body as the DTOs do, and accepts nothing they refuse', () => {
  const run = spawnSync(
    process.execPath,
    ['--require', join(ROOT, 'test/chaos/swc-register.cjs'), join(__dirname, 'submit-body-differential.ts')],
    {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 240_000,
    },
  );
  const passed = run.stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => (JSON.parse(line) as { passed: string }).passed);
  expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
  expect(passed).toHaveLength(8);
});
