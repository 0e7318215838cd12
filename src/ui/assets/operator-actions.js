/*
 * What is being decided, and what a person may do about it (docs/contract.md §4.10): the context
 * card and the operator's actions the step's state allows.
 */
import { duration, factInWords, localTime, segment, stepNow, time, withArticle } from './format.js';
import { $, clear, facts, h } from './dom.js';
import { caller } from './key-and-role.js';
import { api, ApiError, uuid } from './api-client.js';

function lastOf(events, type) {
  for (var index = events.length - 1; index >= 0; index--) if (events[index].type === type) return events[index];
  return undefined;
}

/**
 * The input an approval binds, labelled with its hash (docs/contract.md §4.4): after a corrected
 * input it is not the planned one, and when the ledger was sent only the hash, that is said plainly.
 */
function approvalInput(state) {
  var asked = state.approval_input;
  if (!asked) return undefined;
  if (!asked.recorded)
    return h('span', {
      id: 'approval-input',
      text: 'the input for this hash was not recorded (input ' + asked.input_hash + ')',
    });
  return h(
    'div',
    { id: 'approval-input' },
    h('span', { className: 'small muted', text: 'input ' + asked.input_hash }),
    h('pre', { className: 'small wrap', text: JSON.stringify(asked.input, null, 2) }),
  );
}

export function renderContext(state, events) {
  var plan = lastOf(events, 'StepPlanned');
  var envelope = lastOf(events, 'EnvelopeRecorded');
  var said = envelope && envelope.data && envelope.data.envelope;
  var input = plan && plan.data && plan.data.input;
  var show = state.status !== 'succeeded' || Boolean(said);
  $('context-card').hidden = !show;
  facts($('context-facts'), [
    ['Tool', state.tool + (state.side_effect ? ' (' + state.side_effect + ')' : '')],
    [
      'Planned input',
      input === undefined
        ? 'not stored (input ' + (plan ? plan.data.input_hash : '?') + ')'
        : h('pre', { className: 'small wrap', text: JSON.stringify(input, null, 2) }),
    ],
    [state.status === 'awaiting_approval' ? 'Input to approve' : 'Input of the last approval', approvalInput(state)],
    ['User message', said && said.user_message],
    ['Agent message', said && said.agent_message],
    [
      'Safe details',
      said && said.safe_details && Object.keys(said.safe_details).length
        ? h('pre', { className: 'small wrap', text: JSON.stringify(said.safe_details, null, 2) })
        : undefined,
    ],
    ['Attempts', state.attempts_used + ' used, ' + state.attempts_remaining + ' left'],
  ]);
}

/** Whether an attempt's outcome is unknown and unverified, as the decider judges it (step-state.ts, outcomeUnknown). */
function outcomeUnknown(state) {
  if (!state.attempts_used || state.success) return false;
  if (state.status === 'dispatched' || state.status === 'verifying') return true;
  if (
    state.last_verification &&
    (state.last_verification.outcome === 'found_committed' || state.last_verification.outcome === 'not_found')
  )
    return false;
  var last = state.last_envelope;
  return !last || last.attempt !== state.current_attempt || last.commit_state === 'unknown';
}

/**
 * The actions the step's state allows, each with the fact it records: only those whose fact the
 * served ledger lists as an operator's (`served`, from served-facts.js; null when it could not be read).
 */
function actionsFor(state, served) {
  if (state.status === 'succeeded' || state.status === 'cancelled' || state.status === 'unplanned') return [];
  var unknown = outcomeUnknown(state);
  var actions = [];
  if (unknown) {
    actions.push({ id: 'found', label: 'Found: it committed', fact: 'OutcomeVerifiedManually' });
    actions.push({ id: 'not-found', label: 'Not found', fact: 'OutcomeVerifiedManually' });
  } else {
    actions.push({ id: 'cancel', label: 'Cancel the step', fact: 'StepCancelled' });
  }
  if (state.status === 'escalated') {
    if (!unknown) actions.push({ id: 'reopen', label: 'Reopen with new attempts', fact: 'StepReopened' });
    if (!state.acknowledged) actions.push({ id: 'ack', label: 'Acknowledge', fact: 'EscalationAcknowledged' });
  }
  return served
    ? actions.filter(function (action) {
        return served.indexOf(action.fact) >= 0;
      })
    : actions;
}

/**
 * `redraw` draws the operation again once a fact is recorded (operation-view.js's openOperation);
 * `served` is the operator facts the ledger lists (served-facts.js).
 */
export function renderOperatorActions(ref, state, sameOp, redraw, served) {
  var card = $('operator-card');
  var actions = actionsFor(state, served);
  if (!sameOp) {
    $('operator-form').reset();
    $('operator-result').textContent = '';
  }
  card.hidden = actions.length === 0 && !$('operator-result').textContent;
  card.dataset.ref = ref;
  var has = function (id) {
    return actions.some(function (action) {
      return action.id === id;
    });
  };
  $('evidence-label').hidden = !has('found');
  $('assignee-label').hidden = !has('ack');
  $('attempts-label').hidden = !has('reopen');
  var denied =
    caller && caller.role !== 'operator' && !caller.local
      ? withArticle(caller.role) + ' key may not record operator facts: use a key with the operator role.'
      : '';
  var buttons = clear($('operator-buttons'));
  actions.forEach(function (action) {
    var button = h('button', {
      type: 'button',
      id: 'op-action-' + action.id,
      text: action.label,
      'data-fact': action.fact,
    });
    if (denied) {
      button.disabled = true;
      button.title = denied;
    }
    button.addEventListener('click', function () {
      submitOperatorAction(action.id, redraw);
    });
    buttons.appendChild(button);
  });
  if (denied && actions.length) buttons.appendChild(h('p', { className: 'small muted disabled-reason', text: denied }));
  if (state.acknowledged)
    buttons.appendChild(
      h('p', {
        className: 'small',
        text: 'Acknowledged: ' + state.acknowledged.assignee + ' has it since ' + time(state.acknowledged.at) + '.',
      }),
    );
}

function operatorFact(id, form) {
  var reason = form.elements.reason.value.trim();
  switch (id) {
    case 'found':
      return {
        type: 'OutcomeVerifiedManually',
        data: { outcome: 'found_committed', note: reason, evidence_ref: form.elements.evidence.value.trim() },
      };
    case 'not-found':
      return { type: 'OutcomeVerifiedManually', data: { outcome: 'not_found', note: reason } };
    case 'cancel':
      return { type: 'StepCancelled', data: { reason: reason } };
    case 'reopen':
      return { type: 'StepReopened', data: { attempts: Number(form.elements.attempts.value), reason: reason } };
    case 'ack':
      return {
        type: 'EscalationAcknowledged',
        data: { assignee: form.elements.assignee.value.trim(), note: reason },
      };
  }
}

function submitOperatorAction(id, redraw) {
  var form = $('operator-form');
  var ref = $('operator-card').dataset.ref;
  var result = $('operator-result');
  var fact = operatorFact(id, form);
  var missing = !form.elements.reason.value.trim()
    ? 'a reason'
    : id === 'found' && !fact.data.evidence_ref
      ? 'the evidence ref you saw'
      : id === 'ack' && !fact.data.assignee
        ? 'an assignee'
        : '';
  if (missing) {
    result.textContent = 'Say ' + missing + ' first.';
    result.className = 'small error';
    return;
  }
  result.textContent = 'Recording\u2026';
  result.className = 'small';
  api('/v1/operations/' + segment(ref) + '/events', undefined, {
    body: { events: [Object.assign({ event_id: uuid() }, fact)] },
  }).then(
    function (answer) {
      result.textContent = factInWords(fact) + ': ' + stepNow(answer);
      result.className = 'small ok';
      form.reset();
      return redraw(ref, true);
    },
    function (error) {
      stopCountdown();
      result.className = 'small error';
      if (error instanceof ApiError && error.code === 'VERIFICATION_PREMATURE' && error.directive)
        return countDownTo(result, error.directive.not_before);
      result.textContent =
        error instanceof ApiError
          ? 'Refused: ' + error.code + ' \u2014 ' + error.detail
          : 'Could not reach the ledger: ' + String(error);
    },
  );
}

var countdown;
function stopCountdown() {
  if (countdown) clearInterval(countdown);
  countdown = undefined;
}

/**
 * A not_found inside the consistency window is not conclusive (docs/contract.md §4.5): say until
 * when, in the reader's own time, and count down to it, rather than quote a UTC instant.
 */
function countDownTo(result, notBefore) {
  var draw = function () {
    var left = Date.parse(notBefore) - Date.now();
    if (left <= 0) {
      stopCountdown();
      result.textContent = 'Refused: too early to say not found. It may be recorded now: try again.';
      return;
    }
    result.textContent =
      'Refused: too early to say not found (VERIFICATION_PREMATURE). The provider may still show the write until ' +
      localTime(notBefore) +
      ' (your time, in ' +
      duration(Math.ceil(left / 1000) * 1000) +
      '); look again then.';
  };
  draw();
  countdown = setInterval(draw, 1000);
}
