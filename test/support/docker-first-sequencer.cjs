'use strict';
/**
 * Jest's own order (the files that failed last, then the slowest last time, else the largest),
 * with the Docker build stage first: it is the longest file of the run, and started last it would
 * leave the run waiting on it alone. A fresh clone has no timings from a previous run to go by.
 */
const Sequencer = require('@jest/test-sequencer').default;

class DockerFirstSequencer extends Sequencer {
  sort(tests) {
    const sorted = super.sort(tests);
    const isDocker = (test) => test.context.config.displayName?.name === 'docker';
    return [...sorted.filter(isDocker), ...sorted.filter((test) => !isDocker(test))];
  }
}

module.exports = DockerFirstSequencer;
