/* The runs list (GET /v1/runs), with each run's steps counted by state. */
import { $, badge, cell, clear, h, runLink, when } from './dom.js';
import { api } from './api-client.js';
import { explain, loaded, say } from './page-status.js';
import { show } from './address.js';
import { fillForm, setMore } from './list-page.js';

function countChips(counts) {
  var box = h('span', { className: 'chips inline' });
  Object.keys(counts || {}).forEach(function (status) {
    box.appendChild(h('span', { className: 'chip' }, badge(status), ' ' + counts[status]));
  });
  return box;
}

export function openRuns(filters, quiet) {
  if (!quiet) say('Loading runs\u2026');
  fillForm($('runs-filters'), filters);
  var query = Object.assign({ limit: 50 }, filters);
  return api('/v1/runs', query)
    .then(function (answer) {
      show('runs-view');
      if (!quiet) say('');
      var body = clear($('runs-table').tBodies[0]);
      var append = function (runs) {
        runs.forEach(function (run) {
          body.appendChild(
            h(
              'tr',
              {},
              cell('Run', runLink(run.run_id)),
              cell('Steps', run.total, 'num'),
              cell('Open', run.open, 'num'),
              cell('By state', countChips(run.counts)),
              cell('Updated', when(run.updated_at)),
            ),
          );
        });
      };
      append(answer.runs);
      $('runs-empty').hidden = answer.runs.length > 0;
      setMore('runs-more', answer.next_cursor, function (cursor) {
        return api('/v1/runs', Object.assign({}, query, { cursor: cursor })).then(function (next) {
          append(next.runs);
          return next.next_cursor;
        });
      });
      loaded(answer.as_of_position);
    })
    .catch(function (error) {
      show('runs-view');
      explain(error, 'runs');
    });
}
