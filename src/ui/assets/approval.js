/*
 * A step awaiting approval: an approver grants or denies it (docs/contract.md §4.4, no dispatch
 * without approval).
 */
import { segment, stepNow } from './format.js';
import { $ } from './dom.js';
import { api, ApiError, uuid } from './api-client.js';

export function renderApproval(ref, state, sameOp) {
  var card = $('approval-card');
  var waiting = state.status === 'awaiting_approval';
  if (!sameOp) {
    $('approval-form').reset();
    $('approval-result').textContent = '';
  }
  card.hidden = !waiting && !$('approval-result').textContent;
  $('approval-form').hidden = !waiting;
  $('approval-explain').hidden = !waiting;
  $('approval-title').textContent = waiting ? 'Approval requested' : 'Approval recorded';
  card.dataset.ref = ref;
  // The decision names the input the approver was shown: if the step asked about another since, the
  // ledger refuses it (FACT_NOT_EXPECTED) rather than bind it to an input nobody read (§4.4).
  card.dataset.inputHash = state.approval_input_hash || '';
}

/** `redraw` draws the operation again once the decision is recorded (operation-view.js's openOperation). */
export function submitApproval(event, redraw) {
  event.preventDefault();
  var form = $('approval-form');
  var decision = event.submitter && event.submitter.value === 'denied' ? 'denied' : 'granted';
  var ref = $('approval-card').dataset.ref;
  var inputHash = $('approval-card').dataset.inputHash;
  var approver = form.elements.approver.value.trim();
  var reason = form.elements.reason.value.trim();
  var result = $('approval-result');
  if (!approver || !reason) {
    result.textContent = 'Say who you are and why.';
    result.className = 'small error';
    return;
  }
  Array.prototype.forEach.call(form.querySelectorAll('button'), function (button) {
    button.disabled = true;
  });
  result.textContent = 'Recording the ' + (decision === 'granted' ? 'grant' : 'denial') + '\u2026';
  result.className = 'small';
  api('/v1/operations/' + segment(ref) + '/events', undefined, {
    body: {
      events: [
        {
          event_id: uuid(),
          type: 'ApprovalRecorded',
          data: inputHash
            ? { decision: decision, approver: approver, reason: reason, input_hash: inputHash }
            : { decision: decision, approver: approver, reason: reason },
        },
      ],
    },
  })
    .then(
      function (answer) {
        result.textContent =
          (decision === 'granted' ? 'Granted' : 'Denied') + ' by ' + approver + ': ' + stepNow(answer);
        result.className = 'small ok';
        form.reset();
        return redraw(ref, true);
      },
      function (error) {
        if (error instanceof ApiError && error.status === 403)
          result.textContent =
            'This key may not record approvals (' + error.code + '): use a key with the approver role.';
        else if (error instanceof ApiError && error.status === 401)
          result.textContent = 'Enter an API key above first (' + error.code + ').';
        else
          result.textContent =
            error instanceof ApiError
              ? error.code + ': ' + error.detail
              : 'Could not reach the ledger: ' + String(error);
        result.className = 'small error';
      },
    )
    .then(function () {
      Array.prototype.forEach.call(form.querySelectorAll('button'), function (button) {
        button.disabled = false;
      });
    });
}
