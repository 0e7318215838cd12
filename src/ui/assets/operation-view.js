/*
 * One operation: its state, its story, who holds it, and the cards a person acts from. Reads the
 * stream and the evidence trail, and draws them with operation-story.js.
 */
import { ago, duration, segment, time } from './format.js';
import { $, badge, cell, clear, facts, h, runLink, when } from './dom.js';
import { allPages, api, ApiError } from './api-client.js';
import { explain, loaded, say } from './page-status.js';
import { current, show } from './address.js';
import {
  KIND_OF,
  renderStateTimes,
  renderVerdict,
  stateSpans,
  storyRows,
  toggleDetail,
  toneOf,
  whyOf,
} from './operation-story.js';
import { renderContext, renderOperatorActions } from './operator-actions.js';
import { renderApproval } from './approval.js';
import { operatorFacts } from './served-facts.js';

/** The operation on screen, if any: live-follow.js reads its holder again while the log is quiet. */
export var openRef;
var holderTimer;

/** Who holds the step under a work-feed lease; a failed read shows nothing rather than a guess. */
export function readHolder(ref) {
  return api('/v1/operations/' + segment(ref) + '/lease').catch(function () {
    return undefined;
  });
}

export function renderHolder(lease) {
  var label = $('op-holder');
  clearTimeout(holderTimer);
  if (!lease) {
    label.textContent = '';
    label.className = 'holder small';
    return;
  }
  if (!lease.held) {
    label.textContent = 'no worker holds it';
    label.className = 'holder small muted';
    label.removeAttribute('title');
    return;
  }
  label.textContent =
    'held by ' +
    lease.holder +
    ' until ' +
    lease.expires_at.slice(11, 19) +
    ' UTC' +
    (lease.took_over_from ? ' (took over from ' + lease.took_over_from + ')' : '');
  label.className = 'holder small is-held';
  label.title = time(lease.expires_at);
  // Leases change without an event in the log: look again when this one would end.
  var ref = openRef;
  holderTimer = setTimeout(
    function () {
      if (openRef === ref && current().view === 'operation') readHolder(ref).then(renderHolder);
    },
    Math.min(Math.max(Date.parse(lease.expires_at) - Date.now() + 250, 1000), 600000),
  );
}

export function openOperation(ref, quiet) {
  if (!quiet) say('Loading ' + ref + '\u2026');
  var base = '/v1/operations/' + segment(ref);
  // The API pages a stream's events (docs/contract.md §9): the view shows them all.
  return Promise.all([
    api(base),
    allPages(base + '/events', { limit: 500 }, 'events'),
    readHolder(ref),
    operatorFacts(),
  ])
    .then(function (answers) {
      var state = answers[0];
      var stream = answers[1];
      var lease = answers[2];
      var served = answers[3];
      var last = stream.events[stream.events.length - 1];
      // Read-your-writes: the trail is asked for at least the position of the last event shown.
      var evidence = allPages(
        base + '/evidence',
        { wait_for_position: last.position, wait_timeout_ms: 3000 },
        'entries',
      ).catch(function (error) {
        if (error instanceof ApiError && error.code === 'PROJECTION_LAGGING') return undefined;
        throw error;
      });
      return evidence.then(function (trail) {
        // An answer for an operation the reader has left (a redraw of the one before) must not
        // replace the one they opened since.
        var at = current();
        if (at.view !== 'operation' || at.id !== ref) return;
        // A redraw keeps what the reader opened; a new operation starts closed.
        var sameOp = openRef === ref;
        var opened = sameOp ? openedRevisions() : {};
        openRef = ref;
        renderOperation(ref, state, stream.events, trail, opened, sameOp, served);
        renderHolder(lease);
        if (!quiet) say('');
        loaded(last.position);
      });
    })
    .catch(function (error) {
      // Nothing of an operation that could not be read stays on screen: only the reason.
      openRef = undefined;
      show('none');
      explain(error, 'operation ' + ref);
    });
}

function openedRevisions() {
  var opened = {};
  Array.prototype.forEach.call(document.querySelectorAll('#timeline tr.event.selected'), function (tr) {
    opened[tr.dataset.eventId] = true;
  });
  return opened;
}

function renderOperation(ref, state, events, evidence, opened, sameOp, served) {
  show('operation-view');
  $('op-title').textContent = ref;
  var status = $('op-status');
  status.textContent = state.status.replace(/_/g, ' ');
  status.className = 'badge status-' + state.status;
  facts($('op-facts'), [
    ['Tool', state.tool],
    ['Side effect', state.side_effect],
    ['Run', runLink(state.run_id)],
    ['Attempts', state.attempts_used + ' used, ' + state.attempts_remaining + ' remaining'],
    ['Reason', state.reason],
    ['Since', state.since ? when(state.since) : undefined],
    ['Next', state.directive ? state.directive.next_action : undefined],
    ['Revision', state.revision],
  ]);

  var summaries = {};
  ((evidence && evidence.entries) || []).forEach(function (entry) {
    summaries[entry.event_id] = entry.summary;
  });
  var rows = storyRows(events);
  var body = clear($('timeline').tBodies[0]);
  var rowsByEventId = {};
  var start = events.length ? Date.parse(events[0].recorded_at) : 0;
  rows.forEach(function (row) {
    var fact = row.fact;
    var kind = KIND_OF[fact.type] || 'other';
    var toned = toneOf(fact);
    var tone = toned[0];
    var what = h(
      'div',
      {},
      h('span', { className: 'kind kind-' + kind, text: kind }),
      ' ',
      h('span', { className: 'type', text: fact.type }),
    );
    if (toned[1]) what.appendChild(h('span', { className: 'tone tone-' + tone, text: toned[1] }));
    what.appendChild(h('div', { className: 'summary', text: summaries[fact.event_id] || fact.type }));
    var tr = h(
      'tr',
      {
        className: 'event kind-' + kind + ' row-tone-' + tone,
        tabindex: 0,
        role: 'button',
        'aria-expanded': 'false',
        'data-revision': fact.revision,
        'data-event-id': fact.event_id,
      },
      cell('Rev', row.transition ? fact.revision + '\u2013' + row.transition.revision : fact.revision, 'num'),
      cell(
        'When',
        h(
          'span',
          { className: 'when' },
          h('span', { className: 'relative', text: ago(fact.recorded_at) }),
          h('span', { className: 'absolute', text: time(fact.recorded_at) }),
          h('span', { className: 'offset', text: '+' + duration(Date.parse(fact.recorded_at) - start) }),
        ),
      ),
      cell('What happened', what),
      cell('State after', badge(row.state)),
      cell('Why', whyOf(row), 'why'),
    );
    tr.addEventListener('click', function () {
      toggleDetail(ref, row, tr);
    });
    tr.addEventListener('keydown', function (key) {
      if (key.key === 'Enter' || key.key === ' ') {
        key.preventDefault();
        toggleDetail(ref, row, tr);
      }
    });
    rowsByEventId[fact.event_id] = tr;
    if (row.transition) rowsByEventId[row.transition.event_id] = tr;
    body.appendChild(tr);
    if (opened[fact.event_id]) toggleDetail(ref, row, tr);
  });
  var raw = clear($('raw-events').querySelector('tbody'));
  events.forEach(function (event) {
    raw.appendChild(
      h(
        'tr',
        { className: 'raw-row' },
        cell('Rev', event.revision, 'num'),
        cell('Position', event.position, 'num'),
        cell('Recorded', time(event.recorded_at)),
        cell('Type', event.type, 'type'),
        cell('Caused by', event.causation_event_id || '', 'small wrap'),
      ),
    );
  });
  renderVerdict(evidence, rowsByEventId);
  renderStateTimes(stateSpans(rows));
  renderContext(state, events);
  renderOperatorActions(ref, state, sameOp, openOperation, served);
  renderApproval(ref, state, sameOp);
}
