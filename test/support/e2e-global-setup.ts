import { assertBuildCurrent } from './build-check';
import { ensureFrameworks } from './frameworks';

/**
 * Before any e2e file: the agent frameworks' test project, installed once per lock file; then a
 * stale dist/ refused once, in one line, rather than in every file.
 */
export default function e2eGlobalSetup(): void {
  ensureFrameworks();
  assertBuildCurrent();
}
