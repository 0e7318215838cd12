/*
 * The address: the hash names what is shown, never who is looking (`#/operation/<ref>`,
 * `#/operations?status=verifying`), and which view is on screen follows it.
 */
import { $ } from './dom.js';

export function current() {
  var hash = location.hash.replace(/^#\/?/, '');
  var question = hash.indexOf('?');
  var path = question < 0 ? hash : hash.slice(0, question);
  var query = question < 0 ? '' : hash.slice(question + 1);
  var slash = path.indexOf('/');
  return {
    view: slash < 0 ? path : path.slice(0, slash),
    id: slash < 0 ? '' : decodeURIComponent(path.slice(slash + 1)),
    filters: filtersOf(query),
  };
}

/** Filters live in the hash (`#/operations?status=verifying`), so a filtered list has a URL. */
function filtersOf(query) {
  var params = new URLSearchParams(query || '');
  var filters = {};
  params.forEach(function (value, name) {
    if (value) filters[name] = value;
  });
  return filters;
}

export function queryHash(view, filters, change) {
  var merged = Object.assign({}, filters, change);
  var params = new URLSearchParams();
  Object.keys(merged).forEach(function (name) {
    if (merged[name]) params.set(name, merged[name]);
  });
  var text = params.toString();
  return '#/' + view + (text ? '?' + text : '');
}

var VIEWS = [
  'triage-view',
  'operations-view',
  'runs-view',
  'operation-view',
  'run-view',
  'trust-view',
  'webhooks-view',
];

/** The view the address asks for now (router.js's route() reads the address the same way). */
function addressedView() {
  var at = current();
  if ((at.view === 'operation' || at.view === 'run') && !at.id) return 'triage-view';
  return VIEWS.indexOf(at.view + '-view') >= 0 ? at.view + '-view' : 'triage-view';
}

export function show(view) {
  // A view whose data arrived after the reader moved on (a live redraw of the page they left)
  // must not take the screen back from the one they asked for.
  // 'none' is an operation's or a run's page with nothing readable: only while one is addressed.
  var addressed = addressedView();
  if (view === 'none' ? addressed !== 'operation-view' && addressed !== 'run-view' : view !== addressed) return;
  VIEWS.forEach(function (id) {
    $(id).hidden = id !== view;
  });
  var tab = view.replace('-view', '');
  Array.prototype.forEach.call(document.querySelectorAll('.tabs a'), function (link) {
    if (link.getAttribute('data-view') === tab) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  });
}
