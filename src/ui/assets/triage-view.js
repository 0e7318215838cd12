/*
 * The triage queue (GET /v1/triage): what needs a person, counted by kind, tool and reason, with
 * bulk acknowledge or cancel of escalations.
 */
import { duration, factInWords, localTime, time, withArticle } from './format.js';
import { $, badge, cell, clear, focusedIn, h, opLink, refocus, runLink, when } from './dom.js';
import { api, ApiError, uuid } from './api-client.js';
import { caller } from './key-and-role.js';
import { explain, loaded, say } from './page-status.js';
import { current, queryHash, show } from './address.js';
import { fillForm, labelHolders, setMore } from './list-page.js';

var KIND_LABEL = {
  possible_duplicate: 'possible duplicate write',
  escalated: 'escalated',
  awaiting_approval: 'awaiting approval',
  unknown_outcome: 'unknown outcome',
  dispatch_overdue: 'dispatched past timeout',
  retry_overdue: 'retry overdue',
  input_awaited: 'input awaited',
  acknowledged: 'acknowledged',
};

function chipLink(label, count, hash, current) {
  return h(
    'a',
    { className: 'chip' + (current ? ' current' : ''), href: hash, 'aria-current': current ? 'true' : false },
    label + ' ',
    h('strong', { text: count }),
  );
}

/** The last queue read asked for: an answer to an earlier one (other filters, or older) is not drawn. */
var asked = 0;

export function openTriage(filters, quiet) {
  var generation = ++asked;
  if (!quiet) say('Loading the queue\u2026');
  fillForm($('triage-filters'), filters);
  var set = Object.keys(filters).filter(function (name) {
    return filters[name];
  }).length;
  $('triage-refine-note').textContent = set ? '(' + set + ' set)' : '';
  return api('/v1/triage', Object.assign({ limit: 50 }, filters))
    .then(function (answer) {
      if (generation !== asked) return;
      var focused = focusedIn($('triage-view'));
      show('triage-view');
      if (!quiet) say('');
      var counts = answer.counts;
      $('triage-total').textContent = counts.total + (counts.total === 1 ? ' item' : ' items');
      $('triage-total').className = 'badge ' + (counts.total ? 'status-escalated' : 'status-succeeded');
      $('triage-thresholds').textContent =
        'Unknown outcomes are listed ' +
        (filters.unknown_after_ms
          ? 'after ' + duration(answer.thresholds.unknown_after_ms) + ' unresolved'
          : 'once a lookup can settle them (their plan\u2019s consistency window after the call ended)') +
        '; dispatches after ' +
        duration(answer.thresholds.dispatch_timeout_ms) +
        ' in flight, or their plan\u2019s own dispatch_timeout_ms. Judged at ' +
        time(answer.as_of) +
        '.';
      var byKind = clear($('triage-by-kind'));
      Object.keys(KIND_LABEL).forEach(function (kind) {
        byKind.appendChild(
          chipLink(
            KIND_LABEL[kind],
            counts.by_kind[kind] || 0,
            queryHash('triage', filters, { kind: filters.kind === kind ? '' : kind }),
            filters.kind === kind,
          ),
        );
      });
      var byTool = clear($('triage-by-tool'));
      Object.keys(counts.by_tool)
        .sort()
        .forEach(function (tool) {
          byTool.appendChild(
            chipLink(
              tool,
              counts.by_tool[tool],
              queryHash('triage', filters, { tool: filters.tool === tool ? '' : tool }),
              filters.tool === tool,
            ),
          );
        });
      var byReason = clear($('triage-by-reason'));
      Object.keys(counts.by_reason)
        .sort()
        .forEach(function (reason) {
          byReason.appendChild(
            chipLink(
              reason,
              counts.by_reason[reason],
              queryHash('triage', filters, { reason: filters.reason === reason ? '' : reason }),
              filters.reason === reason,
            ),
          );
        });
      var body = clear($('triage-table').tBodies[0]);
      appendTriage(body, answer.items);
      offerBulkActions();
      $('triage-empty').hidden = answer.items.length > 0;
      $('triage-empty').textContent = answer.waiting.length
        ? 'Nothing needs a person yet: the unknown outcomes below are waiting for a lookup.'
        : 'Nothing needs a person right now.';
      showWaiting(answer);
      setMore('triage-more', answer.next_cursor, function (cursor) {
        return api('/v1/triage', Object.assign({ limit: 50, cursor: cursor }, filters)).then(function (next) {
          appendTriage(body, next.items);
          return next.next_cursor;
        });
      });
      refocus($('triage-view'), focused);
      loaded(answer.as_of_position);
    })
    .catch(function (error) {
      if (generation !== asked) return;
      show('triage-view');
      explain(error, 'triage queue');
    });
}

/** The redraw planned for when the first waiting unknown outcome needs a person. */
var dueTimer;

/**
 * Unknown outcomes that need no person yet (the answer's `waiting`, docs/contract.md §5), each with
 * when it will, in the reader's own time: without them a first unknown outcome reads as "nothing
 * needs a person". The queue is read again when the first comes due, since nothing is appended then.
 */
function showWaiting(answer) {
  var list = clear($('triage-waiting-list'));
  var skew = Date.now() - Date.parse(answer.as_of);
  answer.waiting.forEach(function (item) {
    list.appendChild(
      h(
        'li',
        { className: 'waiting-item', 'data-ref': item.operation_ref },
        opLink(item.operation_ref),
        ' unknown outcome of ' +
          item.tool +
          ', needs a person at ' +
          localTime(item.due_at) +
          ' (your time, in ' +
          duration(Math.max(0, Date.parse(item.due_at) - Date.parse(answer.as_of))) +
          ') unless a lookup settles it first',
      ),
    );
  });
  $('triage-waiting').hidden = answer.waiting.length === 0;
  clearTimeout(dueTimer);
  if (!answer.waiting.length) return;
  // Due by the ledger's clock; the reader's clock may differ from it by `skew`.
  var first = Date.parse(answer.waiting[0].due_at) + skew;
  dueTimer = setTimeout(
    function () {
      if (current().view === 'triage') openTriage(current().filters, true);
    },
    Math.min(Math.max(first - Date.now() + 250, 250), 600000),
  );
}

function appendTriage(body, items) {
  labelHolders(
    body,
    items
      .filter(function (item) {
        return item.kind === 'dispatch_overdue' || item.kind === 'unknown_outcome';
      })
      .map(function (item) {
        return item.operation_ref;
      }),
  );
  items.forEach(function (item) {
    var why = h('span', {});
    // Escalations may be acknowledged or cancelled in bulk (docs/contract.md §4.10).
    if (item.status === 'escalated') {
      var pick = h('input', {
        type: 'checkbox',
        className: 'bulk-pick',
        'data-ref': item.operation_ref,
        'aria-label': 'select ' + item.operation_ref,
      });
      pick.addEventListener('change', offerBulkActions);
      why.appendChild(pick);
      // Escalated after an unavailable lookup: its outcome is unknown, and a cancel is refused
      // OUTCOME_UNVERIFIED (docs/contract.md §4.10). Said on the row, before anything is picked.
      if (item.reason === 'LOOKUP_UNAVAILABLE') pick.setAttribute('data-outcome-unknown', '');
      // Someone has it: another assignee takes it over only with reassign (docs/contract.md §4.10).
      if (item.acknowledged) pick.setAttribute('data-assignee', item.acknowledged.assignee);
    }
    why.appendChild(badge(KIND_LABEL[item.kind], 'kind-' + item.kind));
    if (item.status === 'escalated' && item.reason === 'LOOKUP_UNAVAILABLE')
      why.appendChild(
        h('span', {
          className: 'small muted block no-cancel',
          text: 'Outcome unknown: acknowledge it, or record what you found on its page; it cannot be cancelled yet.',
        }),
      );
    if (item.threshold_ms !== undefined)
      why.appendChild(
        h('span', {
          className: 'muted small block',
          text:
            'for ' +
            duration(item.age_ms) +
            ' (over ' +
            duration(item.threshold_ms) +
            (item.threshold_from === 'policy' ? ', from its plan' : '') +
            ')',
        }),
      );
    why.appendChild(h('span', { className: 'holder small block', 'data-holder': '' }));
    body.appendChild(
      h(
        'tr',
        { className: 'triage-item kind-' + item.kind, 'data-ref': item.operation_ref },
        cell('Why', why),
        cell('Operation', opLink(item.operation_ref)),
        cell('Tool', item.tool),
        cell('Run', runLink(item.run_id)),
        cell('Reason', item.reason, 'why'),
        cell('Since', when(item.since)),
      ),
    );
  });
}

/**
 * Cancel is offered only while no picked escalation has an unknown outcome; acknowledge, while no
 * picked escalation is someone else's unless "reassign" is ticked (the ledger refuses both
 * otherwise); neither action is offered to a key that may not record operator facts
 * (docs/contract.md §4.10, §8). Each says why.
 */
export function offerBulkActions() {
  var unknown = document.querySelectorAll('#triage-table input.bulk-pick[data-outcome-unknown]:checked').length > 0;
  var denied =
    caller && caller.role !== 'operator' && !caller.local
      ? withArticle(caller.role) + ' key may not record operator facts: use a key with the operator role.'
      : '';
  var form = $('bulk-form');
  var assignee = form.elements.assignee.value.trim();
  var held = Array.prototype.filter.call(
    document.querySelectorAll('#triage-table input.bulk-pick[data-assignee]:checked'),
    function (box) {
      return box.getAttribute('data-assignee') !== assignee;
    },
  );
  $('bulk-reassign').hidden = held.length === 0;
  // A take-over is asked for the picks it was ticked for, never carried to the next ones.
  if (!held.length) form.elements.reassign.checked = false;
  var taken =
    held.length && !form.elements.reassign.checked
      ? held
          .map(function (box) {
            return box.getAttribute('data-assignee') + ' has ' + box.getAttribute('data-ref');
          })
          .join('; ') + ': tick \u201creassign\u201d to take it over, or acknowledge as them.'
      : '';
  $('bulk-ack').disabled = Boolean(denied) || Boolean(taken);
  $('bulk-ack').title = denied || taken;
  $('bulk-ack-hint').hidden = Boolean(denied) || !taken;
  $('bulk-ack-hint').textContent = taken;
  $('bulk-cancel').disabled = Boolean(denied) || unknown;
  $('bulk-cancel').title = denied || (unknown ? $('bulk-cancel-hint').textContent.trim() : '');
  $('bulk-cancel-hint').hidden = Boolean(denied) || !unknown;
  $('bulk-denied').hidden = !denied;
  $('bulk-denied').textContent = denied;
}

/** The refs picked in the queue. */
function pickedRefs() {
  return Array.prototype.map.call(document.querySelectorAll('#triage-table input.bulk-pick:checked'), function (box) {
    return box.getAttribute('data-ref');
  });
}

/** As many operations as one POST /v1/operator-facts may name (docs/contract.md §9). */
var MAX_OPERATIONS_PER_REQUEST = 100;

/**
 * The fact on every picked escalation, in one request (POST /v1/operator-facts), each decided on
 * its own and answered on its own line: a refusal of one (another person resolved it meanwhile)
 * leaves the others as they went.
 */
export function bulkAct(kind) {
  var form = $('bulk-form');
  var refs = pickedRefs();
  var reason = form.elements.reason.value.trim();
  var assignee = form.elements.assignee.value.trim();
  var results = clear($('bulk-results'));
  if (!refs.length)
    return results.appendChild(h('li', { className: 'error', text: 'Select escalations in the queue first.' }));
  if (!reason || (kind === 'ack' && !assignee))
    return results.appendChild(
      h('li', { className: 'error', text: kind === 'ack' ? 'Say who takes them and why.' : 'Say why.' }),
    );
  var reassign = kind === 'ack' && !$('bulk-reassign').hidden && form.elements.reassign.checked;
  var fact =
    kind === 'ack'
      ? {
          type: 'EscalationAcknowledged',
          data: reassign ? { assignee: assignee, note: reason, reassign: true } : { assignee: assignee, note: reason },
        }
      : { type: 'StepCancelled', data: { reason: reason } };
  var line = function (ref, ok, text) {
    results.appendChild(h('li', { className: ok ? 'ok' : 'error', 'data-ref': ref, text: ref + ': ' + text }));
  };
  var batches = [];
  for (var start = 0; start < refs.length; start += MAX_OPERATIONS_PER_REQUEST)
    batches.push(refs.slice(start, start + MAX_OPERATIONS_PER_REQUEST));
  return batches
    .reduce(function (done, batch) {
      return done.then(function () {
        var operations = batch.map(function (ref) {
          return { operation_ref: ref, event_id: uuid() };
        });
        return api('/v1/operator-facts', undefined, { body: { fact: fact, operations: operations } }).then(
          function (answer) {
            answer.results.forEach(function (result, index) {
              if (result.outcome === 'recorded')
                line(batch[index], true, factInWords(fact) + '; now ' + result.answer.state.status.replace(/_/g, ' '));
              else line(batch[index], false, 'refused ' + result.problem.code + ' \u2014 ' + result.problem.detail);
            });
          },
          function (error) {
            batch.forEach(function (ref) {
              line(
                ref,
                false,
                'not recorded: ' + (error instanceof ApiError ? error.code + ' \u2014 ' + error.detail : String(error)),
              );
            });
          },
        );
      });
    }, Promise.resolve())
    .then(function () {
      return openTriage(current().filters, true);
    });
}
