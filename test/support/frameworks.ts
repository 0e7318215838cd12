/**
 * The agent frameworks' test project (test/frameworks), installed by scripts/frameworks.cjs: the
 * frameworks are optional peers of @recovery-ledger/agent-frameworks, never the root's dependencies.
 */
import { resolve } from 'node:path';

// eslint-disable-next-line @typescript-eslint/no-require-imports -- a plain-Node script, not a module of the project
const frameworks = require(resolve(__dirname, '../../scripts/frameworks.cjs')) as {
  FRAMEWORK_MODULES: string;
  ensureFrameworks(): void;
};

/** Where the frameworks are installed: a NODE_PATH for a process that runs code importing them. */
export const FRAMEWORK_MODULES = frameworks.FRAMEWORK_MODULES;
export const ensureFrameworks = frameworks.ensureFrameworks;
