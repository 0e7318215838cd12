'use strict';
/**
 * Prints the ten slowest spec files at the end of every run, with their project (tier): a list to
 * read, not a limit to assert. A run that grows slower shows where.
 */
const { relative } = require('node:path');

class SlowestFilesReporter {
  constructor(globalConfig) {
    this.rootDir = globalConfig.rootDir;
    this.files = [];
  }

  onTestResult(test, result) {
    const { start, end } = result.perfStats;
    const tier = test.context.config.displayName?.name ?? '';
    this.files.push({ path: relative(this.rootDir, result.testFilePath), tier, ms: end - start });
  }

  onRunComplete() {
    if (this.files.length === 0) return;
    const slowest = [...this.files].sort((a, b) => b.ms - a.ms).slice(0, 10);
    const lines = slowest.map(
      ({ path, tier, ms }) => `${(ms / 1000).toFixed(1).padStart(7)} s  ${tier.padEnd(6)} ${path}`,
    );
    process.stderr.write(`\nSlowest ${slowest.length} of ${this.files.length} files:\n${lines.join('\n')}\n`);
  }
}

module.exports = SlowestFilesReporter;
