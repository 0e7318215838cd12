/*
 * Webhook deliveries (GET /v1/webhooks/deliveries); an admin also sees the subscriptions and may
 * resend a delivery or send a test event.
 */
import { segment } from './format.js';
import { $, badge, cell, clear, h, opLink, tile, when } from './dom.js';
import { caller } from './key-and-role.js';
import { api, ApiError } from './api-client.js';
import { explain, loaded, say } from './page-status.js';
import { show } from './address.js';

/** Subscriptions, where deliveries go and why they failed are an admin's to see and act on. */
function isAdmin() {
  return Boolean(caller && (caller.local || caller.role === 'admin'));
}

/** An admin's action on the tab (resend, test event), answered on one line, then the tab read again. */
function webhookAction(path, done) {
  var line = $('webhook-action-result');
  line.textContent = 'Sending\u2026';
  line.className = 'small';
  return api(path, undefined, { body: {} }).then(
    function (delivery) {
      line.textContent = done(delivery);
      return openWebhooks(true);
    },
    function (error) {
      line.className = 'small error';
      line.textContent = error instanceof ApiError ? error.code + ': ' + error.detail : 'Could not reach the ledger.';
    },
  );
}

function renderSubscriptions(subscriptions) {
  var table = $('webhook-subscriptions');
  var body = clear(table.tBodies[0]);
  subscriptions.forEach(function (subscription) {
    var test = h(
      'button',
      {
        type: 'button',
        className: 'secondary',
        'data-subscription': subscription.id,
        onclick: function () {
          webhookAction('/v1/admin/webhooks/' + segment(subscription.id) + '/test', function (delivery) {
            return 'Test event ' + delivery.id + ' queued for ' + subscription.url + '.';
          });
        },
      },
      'Send test event',
    );
    body.appendChild(
      h(
        'tr',
        null,
        cell('URL', subscription.url, 'small'),
        cell('Notifications', subscription.kinds.join(', '), 'small'),
        cell('State', subscription.active ? 'active' : 'ended'),
        cell('Test', test),
      ),
    );
  });
  table.hidden = subscriptions.length === 0;
  var note = $('webhook-subscriptions-note');
  note.hidden = subscriptions.length > 0;
  note.textContent = 'No active subscription: an admin makes one with POST /v1/admin/webhooks.';
}

export function openWebhooks(quiet) {
  if (!quiet) say('Loading webhook deliveries\u2026');
  var admin = isAdmin();
  var subscriptions = admin
    ? api('/v1/admin/webhooks').then(
        function (answer) {
          return answer.subscriptions;
        },
        function () {
          return undefined;
        },
      )
    : Promise.resolve(undefined);
  return Promise.all([api('/v1/webhooks/deliveries', { limit: 100 }), subscriptions])
    .then(function (answers) {
      var answer = answers[0];
      show('webhooks-view');
      if (!quiet) say('');
      var tiles = clear($('webhook-counts'));
      tiles.appendChild(tile('Delivered', answer.counts.delivered));
      tiles.appendChild(tile('Pending (retrying)', answer.counts.pending));
      tiles.appendChild(tile('Failed (gave up)', answer.counts.failed));
      if (answers[1]) renderSubscriptions(answers[1]);
      else {
        $('webhook-subscriptions').hidden = true;
        var note = $('webhook-subscriptions-note');
        note.hidden = false;
        note.textContent =
          'An admin key lists the subscriptions, where each delivery goes and why it failed, and may resend a delivery or send a test event.';
      }
      var body = clear($('webhook-table').tBodies[0]);
      answer.deliveries.forEach(function (delivery) {
        var resend = admin
          ? h(
              'button',
              {
                type: 'button',
                className: 'secondary',
                'data-delivery': delivery.id,
                onclick: function () {
                  webhookAction('/v1/admin/webhooks/deliveries/' + segment(delivery.id) + '/resend', function () {
                    return 'Delivery ' + delivery.id + ' will be sent again now, under the same id.';
                  });
                },
              },
              'Resend',
            )
          : '';
        body.appendChild(
          h(
            'tr',
            { className: 'delivery-' + delivery.status },
            cell('Notification', delivery.kind, 'type'),
            cell('Operation', delivery.operation_ref ? opLink(delivery.operation_ref) : 'test event'),
            cell('To', delivery.url || '', 'small'),
            cell('Status', badge(delivery.status, 'delivery')),
            cell('Attempts', delivery.attempts, 'num'),
            cell(
              'Last answer',
              delivery.last_error || (delivery.last_status ? 'HTTP ' + delivery.last_status : ''),
              'small',
            ),
            cell('Next try', delivery.next_attempt_at ? when(delivery.next_attempt_at) : ''),
            cell('Created', when(delivery.created_at)),
            cell('Resend', resend),
          ),
        );
      });
      $('webhook-empty').hidden = answer.deliveries.length > 0;
      loaded();
    })
    .catch(function (error) {
      show('webhooks-view');
      explain(error, 'webhook deliveries');
    });
}
