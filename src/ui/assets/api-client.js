/*
 * The public /v1 API, from the page's own origin, with the key typed in (key-and-role.js). A
 * problem+json answer becomes an ApiError carrying its stable code.
 */
import { apiKey } from './key-and-role.js';

export function ApiError(status, problem) {
  this.status = status;
  this.code = (problem && problem.code) || 'HTTP_' + status;
  this.detail = (problem && (problem.detail || problem.title)) || '';
  // A refusal's directive: a premature not_found carries when it becomes conclusive (not_before).
  this.directive = (problem && problem.directive) || undefined;
}

export function api(path, query, options) {
  var url = path;
  if (query) {
    var params = new URLSearchParams();
    Object.keys(query).forEach(function (name) {
      if (Array.isArray(query[name])) {
        query[name].forEach(function (value) {
          params.append(name, String(value));
        });
      } else if (query[name] !== undefined && query[name] !== '') params.set(name, String(query[name]));
    });
    var text = params.toString();
    if (text) url += '?' + text;
  }
  var headers = { accept: 'application/json' };
  if (apiKey) headers.authorization = 'Bearer ' + apiKey;
  var init = { headers: headers, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer' };
  if (options && options.signal) init.signal = options.signal;
  if (options && options.body !== undefined) {
    init.method = 'POST';
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(options.body);
  }
  return fetch(url, init).then(function (response) {
    return response.text().then(function (body) {
      var parsed;
      try {
        parsed = body ? JSON.parse(body) : undefined;
      } catch (error) {
        parsed = undefined;
      }
      if (!response.ok) throw new ApiError(response.status, parsed);
      return parsed;
    });
  });
}

/** Follows next_cursor until the list is whole; `field` names the list in each page. */
export function allPages(path, query, field) {
  return api(path, query).then(function first(page) {
    if (!page.next_cursor) return page;
    return api(path, Object.assign({}, query, { cursor: page.next_cursor })).then(function (next) {
      next[field] = page[field].concat(next[field]);
      return first(next);
    });
  });
}

/** A v4 UUID from the browser's CSPRNG (crypto.randomUUID needs a secure context; this does not). */
export function uuid() {
  var bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  var hex = Array.prototype.map
    .call(bytes, function (b) {
      return b.toString(16).padStart(2, '0');
    })
    .join('');
  return (
    hex.slice(0, 8) + '-' + hex.slice(8, 12) + '-' + hex.slice(12, 16) + '-' + hex.slice(16, 20) + '-' + hex.slice(20)
  );
}
