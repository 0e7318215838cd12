/*
 * The incident console's entry: plain browser JavaScript in ES modules, served as is (no build
 * step, no external asset), one module per view and per shared part.
 *
 * Every figure on the page comes from the public /v1 API, fetched with the key the reviewer typed
 * in (key-and-role.js). All server data is put into the page with textContent, never as HTML. The
 * page follows the log with a long poll (/v1/changes, live-follow.js) and redraws what it shows
 * when the log moves.
 */
import { segment } from './format.js';
import { $ } from './dom.js';
import { forgetKey, setCaller, showKeyStatus, useKey } from './key-and-role.js';
import { api } from './api-client.js';
import { current } from './address.js';
import { submitApproval } from './approval.js';
import { openOperation } from './operation-view.js';
import { bulkAct, offerBulkActions } from './triage-view.js';
import { openWebhooks } from './webhooks-view.js';
import { bindFilters, go, route } from './router.js';
import { follow } from './live-follow.js';

function readCaller() {
  return api('/v1/whoami').then(
    function (me) {
      setCaller(me);
      showKeyStatus();
      // The actions offered depend on the role: the operation addressed now is drawn again.
      var at = current();
      if (at.view === 'operation' && at.id) openOperation(at.id, true);
      // And so do the queue's bulk actions (drawn whether or not the queue is shown).
      offerBulkActions();
      // What the Webhooks tab shows and offers depends on the role.
      if (current().view === 'webhooks') openWebhooks(true);
    },
    function () {
      setCaller(undefined);
      showKeyStatus();
    },
  );
}

document.addEventListener('DOMContentLoaded', function () {
  $('key-form').addEventListener('submit', function (event) {
    event.preventDefault();
    var input = $('api-key');
    useKey(input.value.trim());
    input.value = '';
    setCaller(undefined);
    showKeyStatus();
    readCaller();
    route();
    follow();
  });
  $('forget-key').addEventListener('click', function () {
    forgetKey();
    showKeyStatus();
  });
  $('search-kind').addEventListener('change', function () {
    $('search-id').placeholder =
      $('search-kind').value === 'run' ? 'run id, e.g. run_81' : 'operation_ref, e.g. run_81/step_4';
  });
  $('search-form').addEventListener('submit', function (event) {
    event.preventDefault();
    var id = $('search-id').value.trim();
    if (!id) return;
    go('#/' + $('search-kind').value + '/' + segment(id));
  });
  $('show-trust').addEventListener('click', function () {
    go('#/trust');
  });
  $('copy-ref').addEventListener('click', function () {
    var ref = $('op-title').textContent;
    var done = function () {
      $('copy-ref').textContent = 'Copied';
      setTimeout(function () {
        $('copy-ref').textContent = 'Copy ref';
      }, 1500);
    };
    if (navigator.clipboard && navigator.clipboard.writeText)
      navigator.clipboard.writeText(ref).then(done, function () {});
  });
  $('toggle-raw').addEventListener('click', function () {
    var raw = $('raw-events');
    raw.hidden = !raw.hidden;
    $('toggle-raw').setAttribute('aria-pressed', String(!raw.hidden));
  });
  $('approval-form').addEventListener('submit', function (event) {
    submitApproval(event, openOperation);
  });
  // Whether acknowledging the picks would take one from who has it is judged as the form changes.
  $('bulk-form').elements.assignee.addEventListener('input', offerBulkActions);
  $('bulk-form').elements.reassign.addEventListener('change', offerBulkActions);
  $('bulk-ack').addEventListener('click', function () {
    bulkAct('ack');
  });
  $('bulk-cancel').addEventListener('click', function () {
    bulkAct('cancel');
  });
  bindFilters('triage-filters', 'triage');
  // On a phone the queue comes first: its filters and counts fold behind one control.
  var narrow = window.matchMedia('(max-width: 760px)');
  var fold = function () {
    $('triage-refine').open = !narrow.matches;
  };
  fold();
  narrow.addEventListener('change', fold);
  bindFilters('operations-filters', 'operations');
  bindFilters('runs-filters', 'runs');
  window.addEventListener('hashchange', function () {
    route();
  });
  showKeyStatus();
  readCaller();
  route();
  follow();
});
