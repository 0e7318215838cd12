'use strict';
/**
 * Jest's own order (the files that failed last, then the slowest last time, else the largest),
 * with the Docker build stage first and then the files known to run longest: started last, any of
 * them would leave the run waiting on it alone while the other cores idle. A fresh clone (CI) has no
 * timings from a previous run to go by, and by size alone a long e2e file of waits and restarts
 * would start after int files that end in seconds.
 */
const Sequencer = require('@jest/test-sequencer').default;

/**
 * The longest files of a whole run on 2 cores, longest first (the slowest-files reporter's list at
 * the end of every run says which; keep this in step with it). Matched on the path's end.
 */
const LONGEST_FIRST = [
  'test/e2e/work-feed.e2e.spec.ts',
  'test/e2e/ui-console.e2e.spec.ts',
  'test/e2e/packages-installed-alone.e2e.spec.ts',
  'test/e2e/postgres-instances.e2e.spec.ts',
  'test/e2e/mcp-gateway.e2e.spec.ts',
  'test/e2e/integrity.e2e.spec.ts',
  'test/e2e/chaos.e2e.spec.ts',
  'test/e2e/security.e2e.spec.ts',
  'test/e2e/python-client.e2e.spec.ts',
  'test/e2e/agent-frameworks-mastra.e2e.spec.ts',
  'test/e2e/work-feed-drain.e2e.spec.ts',
  'test/int/cli-on-call.int.spec.ts',
  'test/int/security-secrets.int.spec.ts',
  'test/e2e/agent-frameworks-openai-agents.e2e.spec.ts',
  'test/e2e/agent-frameworks-langchain.e2e.spec.ts',
  'test/e2e/sdk-crash-recovery.e2e.spec.ts',
  'test/e2e/seed-contract-and-eventstoredb.e2e.spec.ts',
  'test/e2e/webhooks.e2e.spec.ts',
  'test/e2e/restart-long-log.e2e.spec.ts',
  'test/e2e/cli.e2e.spec.ts',
  'test/e2e/core.e2e.spec.ts',
  'test/int/start-build-check.int.spec.ts',
  'test/int/postgres-webhooks.int.spec.ts',
];

function rank(test) {
  if (test.context.config.displayName?.name === 'docker') return -1;
  const path = test.path.split('\\').join('/');
  const index = LONGEST_FIRST.findIndex((file) => path.endsWith(`/${file}`));
  return index === -1 ? LONGEST_FIRST.length : index;
}

class DockerFirstSequencer extends Sequencer {
  sort(tests) {
    const sorted = super.sort(tests);
    // Array.prototype.sort is stable: files of one rank keep Jest's order.
    return [...sorted].sort((a, b) => rank(a) - rank(b));
  }
}

module.exports = DockerFirstSequencer;
