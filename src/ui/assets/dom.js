/*
 * Small DOM helpers and the page's recurring pieces (badges, labelled cells, times, links, tiles).
 * Server data goes in as text nodes or textContent, never as HTML.
 */
import { ago, segment, time } from './format.js';

export function $(id) {
  return document.getElementById(id);
}

export function h(tag, attributes) {
  var element = document.createElement(tag);
  var attrs = attributes || {};
  Object.keys(attrs).forEach(function (name) {
    var value = attrs[name];
    if (value === undefined || value === null || value === false) return;
    if (name === 'text') element.textContent = String(value);
    else if (name === 'className') element.className = value;
    else if (name.indexOf('on') === 0) element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? '' : String(value));
  });
  for (var i = 2; i < arguments.length; i++) {
    var child = arguments[i];
    if (child === undefined || child === null || child === false) continue;
    element.appendChild(
      typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child,
    );
  }
  return element;
}

export function clear(element) {
  while (element.firstChild) element.removeChild(element.firstChild);
  return element;
}

export function badge(status, extra) {
  return h('span', {
    className: 'badge status-' + String(status).replace(/[^a-z_]/g, '') + (extra ? ' ' + extra : ''),
    text: String(status).replace(/_/g, ' '),
  });
}

/** A table cell that carries its column name, shown as a label when the table stacks on a phone. */
export function cell(label, content, className) {
  var td = h('td', { 'data-label': label, className: className });
  if (content instanceof Node) td.appendChild(content);
  else if (content !== undefined && content !== null) td.textContent = String(content);
  return td;
}

export function facts(list, pairs) {
  clear(list);
  pairs.forEach(function (pair) {
    if (pair[1] === undefined || pair[1] === null || pair[1] === '') return;
    list.appendChild(h('dt', { text: pair[0] }));
    list.appendChild(h('dd', {}, pair[1] instanceof Node ? pair[1] : String(pair[1])));
  });
}

/** Relative first, the absolute instant beside it (and in the tooltip): people read both. */
export function when(iso) {
  return h(
    'time',
    { datetime: iso, title: time(iso), className: 'when' },
    h('span', { className: 'relative', text: ago(iso) }),
    h('span', { className: 'absolute', text: time(iso) }),
  );
}

export function opLink(ref) {
  return h('a', { href: '#/operation/' + segment(ref), className: 'ref', text: ref });
}

export function runLink(runId) {
  return runId ? h('a', { href: '#/run/' + segment(runId), text: runId }) : '';
}

export function tile(label, value, note, hash) {
  var content = [
    h('div', { className: 'tile-value', text: value }),
    h('div', { className: 'tile-label', text: label }),
    note ? h('div', { className: 'tile-note', text: note }) : null,
    hash ? h('div', { className: 'tile-open', text: 'open the list \u2192' }) : null,
  ];
  if (hash)
    return h.apply(
      null,
      ['a', { className: 'tile tile-link', href: hash, 'aria-label': label + ': ' + value + ', open the list' }].concat(
        content,
      ),
    );
  return h.apply(null, ['div', { className: 'tile' }].concat(content));
}

/**
 * What has the keyboard's focus inside `container`, as something a redraw keeps (its href, or its
 * data-ref), so a live redraw does not drop a keyboard user's place.
 */
export function focusedIn(container) {
  var active = document.activeElement;
  if (!active || active === document.body || !container.contains(active)) return undefined;
  var href = active.getAttribute('href');
  if (href) return { attribute: 'href', value: href };
  var ref = active.getAttribute('data-ref');
  if (ref) return { attribute: 'data-ref', value: ref };
  return undefined;
}

/** Gives the focus back to the redrawn element standing for the one that had it, when the redraw lost it. */
export function refocus(container, focused) {
  if (!focused) return;
  var active = document.activeElement;
  if (active && active !== document.body) return;
  var match = Array.prototype.find.call(container.querySelectorAll('[' + focused.attribute + ']'), function (element) {
    return element.getAttribute(focused.attribute) === focused.value;
  });
  if (match) match.focus();
}
