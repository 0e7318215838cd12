/* The operations list (GET /v1/operations), newest first, filtered from the hash. */
import { $, badge, cell, clear, h, opLink, runLink, when } from './dom.js';
import { api } from './api-client.js';
import { explain, loaded, say } from './page-status.js';
import { show } from './address.js';
import { fillForm, labelHolders, setMore } from './list-page.js';

export function openOperations(filters, quiet) {
  if (!quiet) say('Loading operations\u2026');
  fillForm($('operations-filters'), filters);
  var query = Object.assign({ order: 'newest', limit: 50 }, filters);
  return api('/v1/operations', query)
    .then(function (answer) {
      show('operations-view');
      if (!quiet) say('');
      var body = clear($('operations-table').tBodies[0]);
      appendOperations(body, answer.items);
      $('operations-empty').hidden = answer.items.length > 0;
      setMore('operations-more', answer.next_cursor, function (cursor) {
        return api('/v1/operations', Object.assign({}, query, { cursor: cursor })).then(function (next) {
          appendOperations(body, next.items);
          return next.next_cursor;
        });
      });
      loaded(answer.as_of_position);
    })
    .catch(function (error) {
      show('operations-view');
      explain(error, 'operations');
    });
}

function appendOperations(body, items) {
  labelHolders(
    body,
    items
      .filter(function (item) {
        return item.status === 'dispatched' || item.status === 'verifying';
      })
      .map(function (item) {
        return item.operation_ref;
      }),
  );
  items.forEach(function (item) {
    body.appendChild(
      h(
        'tr',
        { 'data-ref': item.operation_ref },
        cell('Operation', opLink(item.operation_ref)),
        cell(
          'State',
          h('span', {}, badge(item.status), h('span', { className: 'holder small block', 'data-holder': '' })),
        ),
        cell('Tool', item.tool),
        cell('Run', runLink(item.run_id)),
        cell('Reason', item.reason, 'why'),
        cell('Since', when(item.since)),
      ),
    );
  });
}
