import { assertBuildCurrent } from './build-check';

/** Before any e2e file: refuse a stale dist/ once, in one line, rather than in every file. */
export default function e2eGlobalSetup(): void {
  assertBuildCurrent();
}
