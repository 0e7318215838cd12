/**
 * A test that starts the built service runs dist/, not the sources: a dist/ that is not the build
 * of the sources under test would test yesterday's code and pass. The question is scripts/build.cjs's
 * own (`--if-stale`: the digest of the sources in the build stamp).
 */
import { resolve } from 'node:path';

// eslint-disable-next-line @typescript-eslint/no-require-imports -- a plain-Node build script, not a module of the project
const { isStale } = require(resolve(__dirname, '../../scripts/build.cjs')) as { isStale(): boolean };

export const STALE_BUILD =
  'dist/ is missing or not the build of these sources, and this test runs the build: run `npm run build` first (npm run test:e2e and test:int do)';

let checked = false;

/** Throws one line when dist/ is not the build of the sources under test (checked once per process). */
export function assertBuildCurrent(): void {
  if (checked) return;
  if (isStale()) {
    const error = new Error(STALE_BUILD);
    error.stack = STALE_BUILD;
    throw error;
  }
  checked = true;
}
