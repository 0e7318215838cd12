/* One run (GET /v1/runs/:run_id): its steps in the order they were planned. */
import { segment } from './format.js';
import { $, badge, cell, clear, h, opLink, when } from './dom.js';
import { allPages } from './api-client.js';
import { explain, loaded, say } from './page-status.js';
import { queryHash, show } from './address.js';

export function openRun(runId, quiet) {
  if (!quiet) say('Loading run ' + runId + '\u2026');
  return allPages('/v1/runs/' + segment(runId), {}, 'steps')
    .then(function (run) {
      show('run-view');
      if (!quiet) say('');
      $('run-title').textContent = 'Run ' + run.run_id;
      var open = $('run-open');
      open.textContent =
        run.open === 0 ? 'all ' + run.total + ' steps settled' : run.open + ' of ' + run.total + ' steps open';
      open.className = 'badge ' + (run.open === 0 ? 'status-succeeded' : 'status-verifying');
      var chips = clear($('run-counts'));
      Object.keys(run.counts).forEach(function (status) {
        chips.appendChild(
          h(
            'a',
            { className: 'chip', href: queryHash('operations', { run_id: run.run_id, status: status }, {}) },
            badge(status),
            ' ' + run.counts[status],
          ),
        );
      });
      var body = clear($('run-steps').tBodies[0]);
      run.steps.forEach(function (step) {
        body.appendChild(
          h(
            'tr',
            {},
            cell('Operation', opLink(step.operation_ref)),
            cell('Tool', step.tool),
            cell('Side effect', step.side_effect),
            cell('State', badge(step.status)),
            cell('Attempts', step.attempts_used, 'num'),
            cell('Since', when(step.since)),
            cell('Reason', step.reason, 'why'),
          ),
        );
      });
      loaded(run.as_of_position);
    })
    .catch(function (error) {
      show('none');
      explain(error, 'run ' + runId);
    });
}
