/*
 * What the page says about itself: the message line, how fresh what it shows is (log position and
 * time of the last read), and the outage banner while the ledger does not answer.
 */
import { $ } from './dom.js';
import { ApiError } from './api-client.js';

export function say(text, kind) {
  var box = $('message');
  box.textContent = text;
  box.className = 'message ' + (kind || 'info');
  box.hidden = !text;
}

export function explain(error, what) {
  if (!(error instanceof ApiError))
    return say('Could not reach the ledger: ' + (error && error.message ? error.message : String(error)), 'error');
  if (error.status === 401)
    return say('The ledger needs an API key for this. Enter one above (' + error.code + ').', 'error');
  if (error.status === 403)
    return say('This key may not read ' + what + ' (' + error.code + ': ' + error.detail + ').', 'error');
  if (error.status === 404)
    return say('No ' + what + ' found for this key\u2019s tenant (' + error.code + ').', 'error');
  return say(error.code + ': ' + error.detail, 'error');
}

export var fresh = { at: undefined, position: undefined, live: false };
/** While the ledger does not answer: since when and how (README, "Incident console": watch it live). */
export var outage;

export function setOutage(value) {
  outage = value;
}

export function showOutage() {
  var box = $('outage');
  box.hidden = !outage;
  if (!outage) return;
  box.textContent =
    (outage.status
      ? 'The ledger cannot serve this page (HTTP ' + outage.status
      : 'The ledger is not answering (no answer') +
    ' since ' +
    outage.since.toLocaleTimeString() +
    '). ' +
    (fresh.at
      ? 'This page shows the ledger as of ' + fresh.at.toLocaleTimeString() + ' and may be out of date. '
      : '') +
    'Reconnecting\u2026';
}

export function showFreshness() {
  var box = $('freshness');
  if (!fresh.at) {
    box.textContent = 'not loaded yet';
    box.className = 'freshness';
    return;
  }
  var mode = outage ? 'reconnecting' : fresh.live ? 'live' : 'paused';
  box.textContent =
    mode +
    ' \u00b7 fresh as of ' +
    fresh.at.toLocaleTimeString() +
    (fresh.position !== undefined ? ' \u00b7 log position ' + fresh.position : '');
  box.className = 'freshness is-' + mode;
  box.setAttribute('data-position', fresh.position === undefined ? '' : String(fresh.position));
}

export function loaded(position) {
  fresh.at = new Date();
  if (position !== undefined && (fresh.position === undefined || position > fresh.position)) fresh.position = position;
  showFreshness();
}
