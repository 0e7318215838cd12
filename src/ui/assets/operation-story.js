/*
 * An operation's story: each fact with the transition it caused on one row, the verdict of its
 * evidence trail, time spent in each state, and a row's detail (the state as of its revision).
 */
import { duration, segment, time } from './format.js';
import { $, badge, clear, facts, h } from './dom.js';
import { api } from './api-client.js';

export var KIND_OF = {
  StepPlanned: 'plan',
  AttemptDispatched: 'attempt',
  EnvelopeRecorded: 'envelope',
  DispatchRefused: 'refusal',
  LateOutcomeRecorded: 'envelope',
  VerificationRecorded: 'verification',
  ApprovalRecorded: 'approval',
  TransitionRecorded: 'transition',
};

var TERMINAL = { succeeded: true, escalated: true };

/**
 * What an outcome means, for its styling and its label: a prevented duplicate and a blocked unsafe
 * dispatch are the ledger protecting a write, not failures; a request for approval asks for a
 * person; a committed envelope or lookup is good news.
 */
export function toneOf(event) {
  var data = event.data || {};
  var envelope = data.envelope || {};
  switch (event.type) {
    case 'DispatchRefused':
      return data.code === 'DUPLICATE_PREVENTED' ? ['protection', 'protection'] : ['blocked', 'blocked'];
    case 'LateOutcomeRecorded':
      if (data.possible_duplicate) return ['problem', 'possible duplicate write'];
      return envelope.ok ? ['good', 'committed late'] : ['attention', 'late envelope'];
    case 'EnvelopeRecorded':
      if (envelope.ok) return ['good', 'committed'];
      if (envelope.commit_state === 'unknown') return ['uncertain', 'outcome unknown'];
      if (envelope.next_action === 'request_approval') return ['attention', 'needs approval'];
      return ['problem', 'not committed'];
    case 'VerificationRecorded':
      if (data.outcome === 'found_committed') return ['good', 'found committed'];
      if (data.outcome === 'not_found') return ['neutral', 'not found'];
      return ['problem', 'lookup unavailable'];
    case 'ApprovalRecorded':
      return data.decision === 'granted' ? ['good', 'granted'] : ['problem', 'denied'];
    default:
      return ['neutral', ''];
  }
}

/** Facts with the transition each caused folded onto the same row; the raw list stays one click away. */
export function storyRows(events) {
  var transitionOf = {};
  events.forEach(function (event) {
    if (event.type === 'TransitionRecorded' && event.causation_event_id) transitionOf[event.causation_event_id] = event;
  });
  var status = 'unplanned';
  var rows = [];
  events.forEach(function (event) {
    if (
      event.type === 'TransitionRecorded' &&
      event.causation_event_id &&
      rows.some(function (row) {
        return row.fact.event_id === event.causation_event_id;
      })
    )
      return;
    var transition = event.type === 'TransitionRecorded' ? event : transitionOf[event.event_id];
    if (transition && transition.data && transition.data.to) status = transition.data.to;
    rows.push({
      fact: event,
      transition: transition && transition !== event ? transition : undefined,
      state: status,
    });
  });
  return rows;
}

export function whyOf(row) {
  var data = row.fact.data || {};
  if (row.transition) {
    var t = row.transition.data;
    return t.reason + (t.directive ? ' \u2192 next ' + t.directive.next_action : '');
  }
  if (row.fact.type === 'DispatchRefused') return data.code;
  if (row.fact.type === 'TransitionRecorded') return data.reason;
  return '';
}

/** Spans of time the step spent in each state, from the recorded_at of the transitions. */
export function stateSpans(rows) {
  var spans = [];
  rows.forEach(function (row) {
    var current = spans[spans.length - 1];
    if (current && current.status === row.state) return;
    if (current) current.to = row.fact.recorded_at;
    spans.push({ status: row.state, from: row.fact.recorded_at });
  });
  return spans.filter(function (span) {
    return span.status !== 'unplanned';
  });
}

export function renderStateTimes(spans) {
  var box = clear($('state-times'));
  var now = Date.now();
  var durations = spans.map(function (span) {
    return span.to
      ? Date.parse(span.to) - Date.parse(span.from)
      : TERMINAL[span.status]
        ? 0
        : Math.max(0, now - Date.parse(span.from));
  });
  var longest = Math.max.apply(null, durations.concat([1]));
  spans.forEach(function (span, index) {
    var label = span.to
      ? duration(durations[index])
      : TERMINAL[span.status]
        ? 'terminal since ' + time(span.from)
        : duration(durations[index]) + ' so far';
    var bar = h('div', { className: 'bar status-' + span.status });
    // The width is set through the CSSOM, which the page's style-src 'self' policy allows.
    bar.style.width = span.to || !TERMINAL[span.status] ? Math.max(1, (100 * durations[index]) / longest) + '%' : '0';
    box.appendChild(
      h(
        'div',
        { className: 'state-time' },
        badge(span.status),
        h('div', { className: 'bar-track' }, bar),
        h('span', { className: 'state-duration', text: label }),
      ),
    );
  });
}

export function renderVerdict(evidence, rowsByEventId) {
  if (!evidence) {
    $('verdict-statement').textContent = 'The evidence trail is not projected yet; it appears here in a moment.';
    facts($('verdict-facts'), []);
    return;
  }
  var verdict = evidence.verdict;
  $('verdict-statement').textContent = verdict.statement;
  $('verdict-card').className = 'card verdict commit-' + verdict.commit_state;
  var proof;
  if (verdict.proof_event_id) {
    var row = rowsByEventId[verdict.proof_event_id];
    proof = h(
      'a',
      {
        href: '#',
        className: 'proof-link',
        onclick: function (event) {
          event.preventDefault();
          if (row) {
            row.scrollIntoView({ block: 'center' });
            if (!row.classList.contains('selected')) row.click();
            row.focus();
          }
        },
      },
      (row ? 'revision ' + row.dataset.revision + ', ' : '') + 'event ' + verdict.proof_event_id,
    );
  }
  facts($('verdict-facts'), [
    ['Commit state', verdict.commit_state],
    ['Proven by', verdict.proven_by],
    ['Proof', proof],
    ['Verification tool', verdict.verification_tool],
    ['Evidence', verdict.evidence_ref],
    ['Reason', verdict.reason],
    ['Duplicate writes prevented', String(verdict.duplicates_prevented)],
  ]);
}

function stateSummary(state) {
  var list = h('dl', { className: 'facts compact' });
  facts(list, [
    ['Status', badge(state.status)],
    ['Attempts used', state.attempts_used],
    ['Attempts remaining', state.attempts_remaining],
    ['Current attempt', state.current_attempt],
    ['Reason', state.reason],
    ['Since', time(state.since)],
    ['Not before', time(state.not_before)],
    ['Approval', state.approval],
  ]);
  return list;
}

function rawBlock(event) {
  return h(
    'div',
    { className: 'raw-event' },
    h('h4', { text: event.type + ' \u00b7 revision ' + event.revision }),
    h('pre', { text: JSON.stringify(event.data, null, 2) }),
    h('p', {
      className: 'muted small wrap',
      text:
        'event ' +
        event.event_id +
        ' \u00b7 position ' +
        event.position +
        ' \u00b7 actor ' +
        event.actor +
        (event.causation_event_id ? ' \u00b7 caused by ' + event.causation_event_id : '') +
        ' \u00b7 hash ' +
        event.hash,
    }),
  );
}

export function toggleDetail(ref, row, tr) {
  var next = tr.nextElementSibling;
  if (next && next.classList.contains('detail')) {
    next.parentNode.removeChild(next);
    tr.classList.remove('selected');
    tr.setAttribute('aria-expanded', 'false');
    return;
  }
  var last = row.transition || row.fact;
  var stateBox = h(
    'div',
    { className: 'as-of' },
    h('p', { className: 'muted', text: 'Loading the state at revision ' + last.revision + '\u2026' }),
  );
  var td = h(
    'td',
    { colspan: 5 },
    h(
      'div',
      { className: 'detail-grid' },
      h('div', {}, h('h4', { text: 'State as of revision ' + last.revision }), stateBox),
      h('div', {}, rawBlock(row.fact), row.transition ? rawBlock(row.transition) : null),
    ),
  );
  tr.classList.add('selected');
  tr.setAttribute('aria-expanded', 'true');
  tr.parentNode.insertBefore(h('tr', { className: 'detail' }, td), tr.nextSibling);
  api('/v1/operations/' + segment(ref) + '/events', { as_of_revision: last.revision }).then(
    function (answer) {
      clear(stateBox).appendChild(stateSummary(answer.state));
    },
    function (error) {
      clear(stateBox).appendChild(
        h('p', { className: 'error', text: error.code ? error.code + ': ' + error.detail : String(error) }),
      );
    },
  );
}
