import { ensureFrameworks } from './frameworks';

/** Before the int tier: the agent frameworks' test project, installed once per lock file (scripts/frameworks.cjs). */
export default function frameworksGlobalSetup(): void {
  ensureFrameworks();
}
