/*
 * The incident console. Plain browser JavaScript, served as is (no build step, no external asset).
 *
 * Every figure on the page comes from the public /v1 API, fetched with the key the reviewer typed
 * in. The key lives in this tab's sessionStorage and in memory, goes out only in the
 * Authorization header, and never enters a URL (the hash holds only what is being looked at).
 * All server data is put into the page with textContent, never as HTML. The page follows the log
 * with a long poll (/v1/changes) and redraws what it shows when the log moves.
 */
(function () {
  'use strict';

  var KEY_STORAGE = 'recovery-ledger.api-key';
  var apiKey = sessionStorage.getItem(KEY_STORAGE) || '';
  var LIVE_WAIT_MS = 15000;
  var OUTAGE_RETRY_MS = 500;

  // ---- small DOM helpers ------------------------------------------------------------------------

  function $(id) {
    return document.getElementById(id);
  }

  function h(tag, attributes) {
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

  function clear(element) {
    while (element.firstChild) element.removeChild(element.firstChild);
    return element;
  }

  function badge(status, extra) {
    return h('span', {
      className: 'badge status-' + String(status).replace(/[^a-z_]/g, '') + (extra ? ' ' + extra : ''),
      text: String(status).replace(/_/g, ' '),
    });
  }

  /** A table cell that carries its column name, shown as a label when the table stacks on a phone. */
  function cell(label, content, className) {
    var td = h('td', { 'data-label': label, className: className });
    if (content instanceof Node) td.appendChild(content);
    else if (content !== undefined && content !== null) td.textContent = String(content);
    return td;
  }

  function facts(list, pairs) {
    clear(list);
    pairs.forEach(function (pair) {
      if (pair[1] === undefined || pair[1] === null || pair[1] === '') return;
      list.appendChild(h('dt', { text: pair[0] }));
      list.appendChild(h('dd', {}, pair[1] instanceof Node ? pair[1] : String(pair[1])));
    });
  }

  function duration(ms) {
    if (ms < 1000) return Math.round(ms) + ' ms';
    var seconds = ms / 1000;
    if (seconds < 60) return seconds.toFixed(1) + ' s';
    var minutes = Math.floor(seconds / 60);
    if (minutes < 60) return minutes + 'm ' + String(Math.floor(seconds % 60)).padStart(2, '0') + 's';
    var hours = Math.floor(minutes / 60);
    if (hours < 48) return hours + 'h ' + String(minutes % 60).padStart(2, '0') + 'm';
    return Math.floor(hours / 24) + 'd ' + (hours % 24) + 'h';
  }

  function time(iso) {
    return iso ? iso.replace('T', ' ').replace('Z', ' UTC') : '';
  }

  function ago(iso) {
    var ms = Date.now() - Date.parse(iso);
    if (!isFinite(ms)) return '';
    // An instant still to come (a delivery's next try) reads forward.
    if (ms < -45000) {
      var ahead = Math.round(-ms / 60000);
      return ahead < 60 ? 'in ' + ahead + ' min' : 'in ' + Math.round(ahead / 60) + ' h';
    }
    if (ms < 45000) return 'just now';
    var minutes = Math.round(ms / 60000);
    if (minutes < 60) return minutes + ' min ago';
    var hours = Math.round(minutes / 60);
    if (hours < 48) return hours + ' h ago';
    return Math.round(hours / 24) + ' days ago';
  }

  /** Relative first, the absolute instant beside it (and in the tooltip): people read both. */
  function when(iso) {
    return h(
      'time',
      { datetime: iso, title: time(iso), className: 'when' },
      h('span', { className: 'relative', text: ago(iso) }),
      h('span', { className: 'absolute', text: time(iso) }),
    );
  }

  function opLink(ref) {
    return h('a', { href: '#/operation/' + segment(ref), className: 'ref', text: ref });
  }

  function runLink(runId) {
    return runId ? h('a', { href: '#/run/' + segment(runId), text: runId }) : '';
  }

  // ---- the API ----------------------------------------------------------------------------------

  function ApiError(status, problem) {
    this.status = status;
    this.code = (problem && problem.code) || 'HTTP_' + status;
    this.detail = (problem && (problem.detail || problem.title)) || '';
  }

  function api(path, query, options) {
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
  function allPages(path, query, field) {
    return api(path, query).then(function first(page) {
      if (!page.next_cursor) return page;
      return api(path, Object.assign({}, query, { cursor: page.next_cursor })).then(function (next) {
        next[field] = page[field].concat(next[field]);
        return first(next);
      });
    });
  }

  var segment = encodeURIComponent;

  /** A v4 UUID from the browser's CSPRNG (crypto.randomUUID needs a secure context; this does not). */
  function uuid() {
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

  // ---- messages and freshness -------------------------------------------------------------------

  function say(text, kind) {
    var box = $('message');
    box.textContent = text;
    box.className = 'message ' + (kind || 'info');
    box.hidden = !text;
  }

  function explain(error, what) {
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

  var fresh = { at: undefined, position: undefined, live: false };
  /** While the ledger does not answer: since when and how (README, "Incident console": watch it live). */
  var outage;

  function showOutage() {
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

  function showFreshness() {
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

  function loaded(position) {
    fresh.at = new Date();
    if (position !== undefined && (fresh.position === undefined || position > fresh.position))
      fresh.position = position;
    showFreshness();
  }

  // ---- views ------------------------------------------------------------------------------------

  var VIEWS = [
    'triage-view',
    'operations-view',
    'runs-view',
    'operation-view',
    'run-view',
    'trust-view',
    'webhooks-view',
  ];

  /** The view the address asks for now (route() below reads the address the same way). */
  function addressedView() {
    var at = current();
    if ((at.view === 'operation' || at.view === 'run') && !at.id) return 'triage-view';
    return VIEWS.indexOf(at.view + '-view') >= 0 ? at.view + '-view' : 'triage-view';
  }

  function show(view) {
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

  function go(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
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

  function fillForm(form, filters) {
    Array.prototype.forEach.call(form.elements, function (field) {
      if (!field.name) return;
      if (field.type === 'checkbox') field.checked = filters[field.name] === field.value;
      else field.value = filters[field.name] || '';
    });
  }

  function bindFilters(formId, view) {
    var form = $(formId);
    form.addEventListener('submit', function (event) {
      event.preventDefault();
      var params = new URLSearchParams();
      Array.prototype.forEach.call(form.elements, function (field) {
        if (!field.name) return;
        if (field.type === 'checkbox') {
          if (field.checked) params.set(field.name, field.value);
        } else if (field.value.trim()) params.set(field.name, field.value.trim());
      });
      var text = params.toString();
      go('#/' + view + (text ? '?' + text : ''));
    });
    form.querySelector('[data-clear]').addEventListener('click', function () {
      go('#/' + view);
    });
  }

  // ---- triage -----------------------------------------------------------------------------------

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

  function queryHash(view, filters, change) {
    var merged = Object.assign({}, filters, change);
    var params = new URLSearchParams();
    Object.keys(merged).forEach(function (name) {
      if (merged[name]) params.set(name, merged[name]);
    });
    var text = params.toString();
    return '#/' + view + (text ? '?' + text : '');
  }

  var lists = {};

  function openTriage(filters, quiet) {
    if (!quiet) say('Loading the queue\u2026');
    fillForm($('triage-filters'), filters);
    var set = Object.keys(filters).filter(function (name) {
      return filters[name];
    }).length;
    $('triage-refine-note').textContent = set ? '(' + set + ' set)' : '';
    return api('/v1/triage', Object.assign({ limit: 50 }, filters))
      .then(function (answer) {
        show('triage-view');
        if (!quiet) say('');
        var counts = answer.counts;
        $('triage-total').textContent = counts.total + (counts.total === 1 ? ' item' : ' items');
        $('triage-total').className = 'badge ' + (counts.total ? 'status-escalated' : 'status-succeeded');
        $('triage-thresholds').textContent =
          'Unknown outcomes are listed after ' +
          duration(answer.thresholds.unknown_after_ms) +
          ' unresolved; dispatches after ' +
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
        $('triage-empty').hidden = answer.items.length > 0;
        setMore('triage-more', answer.next_cursor, function (cursor) {
          return api('/v1/triage', Object.assign({ limit: 50, cursor: cursor }, filters)).then(function (next) {
            appendTriage(body, next.items);
            return next.next_cursor;
          });
        });
        loaded(answer.as_of_position);
      })
      .catch(function (error) {
        show('triage-view');
        explain(error, 'triage queue');
      });
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
      if (item.status === 'escalated')
        why.appendChild(
          h('input', {
            type: 'checkbox',
            className: 'bulk-pick',
            'data-ref': item.operation_ref,
            'aria-label': 'select ' + item.operation_ref,
          }),
        );
      why.appendChild(badge(KIND_LABEL[item.kind], 'kind-' + item.kind));
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

  /** The refs picked in the queue. */
  function pickedRefs() {
    return Array.prototype.map.call(document.querySelectorAll('#triage-table input.bulk-pick:checked'), function (box) {
      return box.getAttribute('data-ref');
    });
  }

  /**
   * One operator fact per picked escalation, one after another, each answered on its own line: a
   * refusal of one (another person resolved it meanwhile) leaves the others as they went.
   */
  function bulkAct(kind) {
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
    var fact =
      kind === 'ack'
        ? { type: 'EscalationAcknowledged', data: { assignee: assignee, note: reason } }
        : { type: 'StepCancelled', data: { reason: reason } };
    return refs
      .reduce(function (done, ref) {
        return done.then(function () {
          return api('/v1/operations/' + segment(ref) + '/events', undefined, {
            body: { events: [Object.assign({ event_id: uuid() }, fact)] },
          }).then(
            function (answer) {
              results.appendChild(
                h('li', {
                  className: 'ok',
                  'data-ref': ref,
                  text: ref + ': ' + fact.type + ' recorded, now ' + answer.state.status.replace(/_/g, ' '),
                }),
              );
            },
            function (error) {
              results.appendChild(
                h('li', {
                  className: 'error',
                  'data-ref': ref,
                  text:
                    ref +
                    ': refused ' +
                    (error instanceof ApiError ? error.code + ' \u2014 ' + error.detail : String(error)),
                }),
              );
            },
          );
        });
      }, Promise.resolve())
      .then(function () {
        return openTriage(current().filters, true);
      });
  }

  /**
   * "held by <worker>" on the rows of a list page whose steps a worker may be acting on, from one
   * read for the whole page (GET /v1/leases), never one per row. A failed read labels nothing.
   */
  function labelHolders(body, refs) {
    if (!refs.length) return;
    api('/v1/leases', { operation_ref: refs }).then(
      function (answer) {
        answer.items.forEach(function (lease) {
          if (!lease.held) return;
          Array.prototype.forEach.call(body.querySelectorAll('tr'), function (tr) {
            if (tr.getAttribute('data-ref') !== lease.operation_ref) return;
            var target = tr.querySelector('[data-holder]');
            if (target) target.textContent = 'held by ' + lease.holder;
          });
        });
      },
      function () {},
    );
  }

  function setMore(buttonId, cursor, loadMore) {
    var button = $(buttonId);
    lists[buttonId] = cursor;
    button.hidden = !cursor;
    button.onclick = function () {
      button.disabled = true;
      loadMore(lists[buttonId]).then(
        function (next) {
          lists[buttonId] = next;
          button.hidden = !next;
          button.disabled = false;
        },
        function (error) {
          button.disabled = false;
          explain(error, 'the next page');
        },
      );
    };
  }

  // ---- operations and runs lists ----------------------------------------------------------------

  function openOperations(filters, quiet) {
    if (!quiet) say('Loading operations\u2026');
    fillForm($('operations-filters'), filters);
    var query = Object.assign({ order: 'newest', limit: 50 }, filters);
    return api('/v1/operations', query)
      .then(function (answer) {
        show('operations-view');
        if (!quiet) say('');
        var body = clear($('operations-table').tBodies[0]);
        appendOperations(body, answer.items);
        $('operations-empty').hidden = answer.items.length > 0;
        setMore('operations-more', answer.next_cursor, function (cursor) {
          return api('/v1/operations', Object.assign({}, query, { cursor: cursor })).then(function (next) {
            appendOperations(body, next.items);
            return next.next_cursor;
          });
        });
        loaded(answer.as_of_position);
      })
      .catch(function (error) {
        show('operations-view');
        explain(error, 'operations');
      });
  }

  function appendOperations(body, items) {
    labelHolders(
      body,
      items
        .filter(function (item) {
          return item.status === 'dispatched' || item.status === 'verifying';
        })
        .map(function (item) {
          return item.operation_ref;
        }),
    );
    items.forEach(function (item) {
      body.appendChild(
        h(
          'tr',
          { 'data-ref': item.operation_ref },
          cell('Operation', opLink(item.operation_ref)),
          cell(
            'State',
            h('span', {}, badge(item.status), h('span', { className: 'holder small block', 'data-holder': '' })),
          ),
          cell('Tool', item.tool),
          cell('Run', runLink(item.run_id)),
          cell('Reason', item.reason, 'why'),
          cell('Since', when(item.since)),
        ),
      );
    });
  }

  function countChips(counts) {
    var box = h('span', { className: 'chips inline' });
    Object.keys(counts || {}).forEach(function (status) {
      box.appendChild(h('span', { className: 'chip' }, badge(status), ' ' + counts[status]));
    });
    return box;
  }

  function openRuns(filters, quiet) {
    if (!quiet) say('Loading runs\u2026');
    fillForm($('runs-filters'), filters);
    var query = Object.assign({ limit: 50 }, filters);
    return api('/v1/runs', query)
      .then(function (answer) {
        show('runs-view');
        if (!quiet) say('');
        var body = clear($('runs-table').tBodies[0]);
        var append = function (runs) {
          runs.forEach(function (run) {
            body.appendChild(
              h(
                'tr',
                {},
                cell('Run', runLink(run.run_id)),
                cell('Steps', run.total, 'num'),
                cell('Open', run.open, 'num'),
                cell('By state', countChips(run.counts)),
                cell('Updated', when(run.updated_at)),
              ),
            );
          });
        };
        append(answer.runs);
        $('runs-empty').hidden = answer.runs.length > 0;
        setMore('runs-more', answer.next_cursor, function (cursor) {
          return api('/v1/runs', Object.assign({}, query, { cursor: cursor })).then(function (next) {
            append(next.runs);
            return next.next_cursor;
          });
        });
        loaded(answer.as_of_position);
      })
      .catch(function (error) {
        show('runs-view');
        explain(error, 'runs');
      });
  }

  // ---- one operation ----------------------------------------------------------------------------

  var KIND_OF = {
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
  function toneOf(event) {
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
  function storyRows(events) {
    var transitionOf = {};
    events.forEach(function (event) {
      if (event.type === 'TransitionRecorded' && event.causation_event_id)
        transitionOf[event.causation_event_id] = event;
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

  function whyOf(row) {
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
  function stateSpans(rows) {
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

  function renderStateTimes(spans) {
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

  function renderVerdict(evidence, rowsByEventId) {
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

  function toggleDetail(ref, row, tr) {
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

  var openRef;
  var holderTimer;

  /** Who holds the step under a work-feed lease; a failed read shows nothing rather than a guess. */
  function readHolder(ref) {
    return api('/v1/operations/' + segment(ref) + '/lease').catch(function () {
      return undefined;
    });
  }

  function renderHolder(lease) {
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

  function openOperation(ref, quiet) {
    if (!quiet) say('Loading ' + ref + '\u2026');
    var base = '/v1/operations/' + segment(ref);
    return Promise.all([api(base), api(base + '/events'), readHolder(ref)])
      .then(function (answers) {
        var state = answers[0];
        var stream = answers[1];
        var lease = answers[2];
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
          renderOperation(ref, state, stream.events, trail, opened, sameOp);
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

  function renderOperation(ref, state, events, evidence, opened, sameOp) {
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
    renderOperatorActions(ref, state, sameOp);
    renderApproval(ref, state, sameOp);
  }

  // ---- what is being decided, and what a person may do (docs/contract.md §4.10) ---------------------

  /** The role of the key in use, from GET /v1/whoami; undefined until known. */
  var caller;

  function readCaller() {
    return api('/v1/whoami').then(
      function (me) {
        caller = me;
        showKeyStatus();
        // The actions offered depend on the role: the operation addressed now is drawn again.
        var at = current();
        if (at.view === 'operation' && at.id) openOperation(at.id, true);
        // What the Webhooks tab shows and offers depends on the role.
        if (current().view === 'webhooks') openWebhooks(true);
      },
      function () {
        caller = undefined;
        showKeyStatus();
      },
    );
  }

  function lastOf(events, type) {
    for (var index = events.length - 1; index >= 0; index--) if (events[index].type === type) return events[index];
    return undefined;
  }

  function renderContext(state, events) {
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

  /** The actions the step's state allows, each with the fact it records. */
  function actionsFor(state) {
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
    return actions;
  }

  function renderOperatorActions(ref, state, sameOp) {
    var card = $('operator-card');
    var actions = actionsFor(state);
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
        ? 'A ' + caller.role + ' key may not record operator facts: use a key with the operator role.'
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
        submitOperatorAction(action.id);
      });
      buttons.appendChild(button);
    });
    if (denied && actions.length)
      buttons.appendChild(h('p', { className: 'small muted disabled-reason', text: denied }));
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

  function submitOperatorAction(id) {
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
    result.textContent = 'Recording ' + fact.type + '\u2026';
    result.className = 'small';
    api('/v1/operations/' + segment(ref) + '/events', undefined, {
      body: { events: [Object.assign({ event_id: uuid() }, fact)] },
    }).then(
      function (answer) {
        result.textContent =
          fact.type +
          ' recorded: the step is now ' +
          answer.state.status.replace(/_/g, ' ') +
          ' (next: ' +
          answer.directive.next_action +
          ').';
        result.className = 'small ok';
        form.reset();
        return openOperation(ref, true);
      },
      function (error) {
        result.textContent =
          error instanceof ApiError
            ? 'Refused: ' + error.code + ' \u2014 ' + error.detail
            : 'Could not reach the ledger: ' + String(error);
        result.className = 'small error';
      },
    );
  }

  // ---- approvals --------------------------------------------------------------------------------

  function renderApproval(ref, state, sameOp) {
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
  }

  function submitApproval(event) {
    event.preventDefault();
    var form = $('approval-form');
    var decision = event.submitter && event.submitter.value === 'denied' ? 'denied' : 'granted';
    var ref = $('approval-card').dataset.ref;
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
            data: { decision: decision, approver: approver, reason: reason },
          },
        ],
      },
    })
      .then(
        function (answer) {
          result.textContent =
            (decision === 'granted' ? 'Granted' : 'Denied') +
            ' by ' +
            approver +
            ': the step is now ' +
            answer.state.status.replace(/_/g, ' ') +
            ' (next: ' +
            answer.directive.next_action +
            ').';
          result.className = 'small ok';
          form.reset();
          return openOperation(ref, true);
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

  // ---- run, trust, webhooks -----------------------------------------------------------------------

  function openRun(runId, quiet) {
    if (!quiet) say('Loading run ' + runId + '\u2026');
    return allPages('/v1/runs/' + segment(runId), {}, 'steps')
      .then(function (run) {
        show('run-view');
        if (!quiet) say('');
        $('run-title').textContent = 'Run ' + run.run_id;
        var open = $('run-open');
        open.textContent =
          run.open === 0 ? 'all ' + run.total + ' steps settled' : run.open + ' of ' + run.total + ' steps open';
        open.className = 'badge ' + (run.open === 0 ? 'status-succeeded' : 'status-verifying');
        var chips = clear($('run-counts'));
        Object.keys(run.counts).forEach(function (status) {
          chips.appendChild(
            h(
              'a',
              { className: 'chip', href: queryHash('operations', { run_id: run.run_id, status: status }, {}) },
              badge(status),
              ' ' + run.counts[status],
            ),
          );
        });
        var body = clear($('run-steps').tBodies[0]);
        run.steps.forEach(function (step) {
          body.appendChild(
            h(
              'tr',
              {},
              cell('Operation', opLink(step.operation_ref)),
              cell('Tool', step.tool),
              cell('Side effect', step.side_effect),
              cell('State', badge(step.status)),
              cell('Attempts', step.attempts_used, 'num'),
              cell('Since', when(step.since)),
              cell('Reason', step.reason, 'why'),
            ),
          );
        });
        loaded(run.as_of_position);
      })
      .catch(function (error) {
        show('none');
        explain(error, 'run ' + runId);
      });
  }

  function tile(label, value, note, hash) {
    var content = [
      h('div', { className: 'tile-value', text: value }),
      h('div', { className: 'tile-label', text: label }),
      note ? h('div', { className: 'tile-note', text: note }) : null,
      hash ? h('div', { className: 'tile-open', text: 'open the list \u2192' }) : null,
    ];
    if (hash)
      return h.apply(
        null,
        [
          'a',
          { className: 'tile tile-link', href: hash, 'aria-label': label + ': ' + value + ', open the list' },
        ].concat(content),
      );
    return h.apply(null, ['div', { className: 'tile' }].concat(content));
  }

  /** A figure that opens the operations it counts (a zero opens nothing). */
  function countLink(count, filters) {
    return count ? h('a', { href: queryHash('operations', filters, {}), text: count }) : String(count);
  }

  function openTrust(quiet) {
    if (!quiet) say('Loading trust metrics\u2026');
    return allPages('/v1/metrics/trust', {}, 'tools')
      .then(function (trust) {
        show('trust-view');
        if (!quiet) say('');
        var o = trust.overall;
        var tiles = clear($('trust-overall'));
        tiles.appendChild(
          tile(
            'Unknown outcomes',
            o.unknown_outcomes,
            o.unknown_via_envelope + ' from envelopes, ' + o.unknown_in_flight + ' in flight',
            '#/operations?has=unknown_outcomes',
          ),
        );
        tiles.appendChild(
          tile(
            'Resolved by lookup',
            o.resolved_by_verification,
            o.verified_found_committed +
              ' committed, ' +
              o.verified_not_found +
              ' not found, ' +
              o.lookup_unavailable +
              ' lookups unavailable',
            '#/operations?has=resolved_by_lookup',
          ),
        );
        tiles.appendChild(
          tile(
            'Duplicate writes prevented',
            o.duplicate_writes_prevented,
            undefined,
            '#/operations?has=duplicates_prevented',
          ),
        );
        tiles.appendChild(
          tile(
            'Identical retries blocked',
            o.identical_retries_blocked,
            undefined,
            '#/operations?has=identical_retries_blocked',
          ),
        );
        tiles.appendChild(
          tile(
            'Unverified dispatches refused',
            o.unverified_dispatches_refused,
            undefined,
            '#/operations?has=unverified_dispatches_refused',
          ),
        );
        tiles.appendChild(
          tile('Terminal escalations', o.terminal_escalations, undefined, '#/operations?status=escalated'),
        );
        tiles.appendChild(
          tile('Pending recovery now', o.pending_recovery_now, 'steps verifying now', '#/operations?status=verifying'),
        );
        tiles.appendChild(
          tile(
            'Time in pending recovery',
            o.pending_recovery.count ? duration(o.pending_recovery.p90_ms) + ' p90' : '\u2013',
            o.pending_recovery.count
              ? o.pending_recovery.count +
                  ' resolved, median ' +
                  duration(o.pending_recovery.p50_ms) +
                  ', max ' +
                  duration(o.pending_recovery.max_ms)
              : 'none resolved yet',
          ),
        );
        var body = clear($('trust-tools').tBodies[0]);
        trust.tools.forEach(function (t) {
          body.appendChild(
            h(
              'tr',
              {},
              cell('Tool', h('a', { href: queryHash('operations', { tool: t.tool }, {}), text: t.tool })),
              cell('Planned', t.operations_planned, 'num'),
              cell('Unknown outcomes', countLink(t.unknown_outcomes, { tool: t.tool, has: 'unknown_outcomes' }), 'num'),
              cell(
                'Resolved by lookup',
                countLink(t.resolved_by_verification, { tool: t.tool, has: 'resolved_by_lookup' }),
                'num',
              ),
              cell(
                'Duplicates prevented',
                countLink(t.duplicate_writes_prevented, { tool: t.tool, has: 'duplicates_prevented' }),
                'num',
              ),
              cell(
                'Identical retries blocked',
                countLink(t.identical_retries_blocked, { tool: t.tool, has: 'identical_retries_blocked' }),
                'num',
              ),
              cell('Escalations', countLink(t.terminal_escalations, { tool: t.tool, status: 'escalated' }), 'num'),
              cell('Pending now', countLink(t.pending_recovery_now, { tool: t.tool, status: 'verifying' }), 'num'),
              cell('Pending p90', t.pending_recovery.count ? duration(t.pending_recovery.p90_ms) : '\u2013', 'num'),
            ),
          );
        });
        loaded(trust.as_of_position);
      })
      .catch(function (error) {
        show('trust-view');
        explain(error, 'trust metrics');
      });
  }

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

  function openWebhooks(quiet) {
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

  // ---- routing: the hash names what is shown, never who is looking ----------------------------------

  function current() {
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

  function route(quiet) {
    var at = current();
    if (at.view === 'operation' && at.id) {
      if (!quiet) {
        $('search-kind').value = 'operation';
        $('search-id').value = at.id;
      }
      return openOperation(at.id, quiet);
    }
    if (at.view === 'run' && at.id) {
      if (!quiet) {
        $('search-kind').value = 'run';
        $('search-id').value = at.id;
      }
      return openRun(at.id, quiet);
    }
    if (at.view === 'operations') return openOperations(at.filters, quiet);
    if (at.view === 'runs') return openRuns(at.filters, quiet);
    if (at.view === 'trust') return openTrust(quiet);
    if (at.view === 'webhooks') return openWebhooks(quiet);
    return openTriage(at.filters, quiet);
  }

  // ---- live: follow the log and redraw what is shown --------------------------------------------------

  var following = 0;
  var followed;

  function follow() {
    var generation = ++following;
    // A new key starts a new follow: the old long poll is given up, not left holding one of the
    // browser's few connections to the ledger until its wait ends (the page's own reads queue behind them).
    if (followed) followed.abort();
    followed = new AbortController();
    var signal = followed.signal;
    function poll() {
      if (generation !== following) return;
      // While the ledger is away, each try answers at once, so the page is live again within a
      // retry of its return rather than at the end of a long poll.
      var waitMs = outage ? 0 : LIVE_WAIT_MS;
      api('/v1/changes', { after: fresh.position || 0, wait_ms: waitMs }, { signal: signal }).then(
        function (answer) {
          if (generation !== following) return;
          fresh.live = true;
          if (outage) {
            outage = undefined;
            showOutage();
            say('');
            fresh.position = answer.position;
            Promise.resolve(route(true)).then(poll, poll);
            return;
          }
          if (answer.changed || (fresh.position !== undefined && answer.position > fresh.position)) {
            fresh.position = answer.position;
            Promise.resolve(route(true)).then(poll, poll);
          } else {
            fresh.position = answer.position;
            loaded();
            // A worker taking or giving back a step appends nothing: the holder is read again anyway.
            if (openRef && current().view === 'operation') readHolder(openRef).then(renderHolder);
            poll();
          }
        },
        function (error) {
          if (generation !== following || signal.aborted) return;
          fresh.live = false;
          // No answer, or the ledger answering that it cannot serve: an outage, said in a banner.
          if (!(error instanceof ApiError) || error.status >= 500) {
            if (!outage)
              // A ledger shutting down answers 503 before it stops answering at all.
              outage = { since: new Date(), status: error instanceof ApiError ? error.status : undefined };
            showOutage();
            showFreshness();
            setTimeout(poll, OUTAGE_RETRY_MS);
            return;
          }
          // Without a usable key the page stays as it is and says so.
          showFreshness();
          setTimeout(poll, 5000);
        },
      );
    }
    poll();
  }

  function showKeyStatus() {
    $('key-status').textContent = apiKey ? 'key set for this tab' : 'no key';
    var role = $('key-role');
    role.hidden = !caller;
    if (caller)
      role.textContent = caller.local ? 'local mode: every role' : 'role ' + caller.role + ', tenant ' + caller.tenant;
  }

  document.addEventListener('DOMContentLoaded', function () {
    $('key-form').addEventListener('submit', function (event) {
      event.preventDefault();
      var input = $('api-key');
      apiKey = input.value.trim();
      input.value = '';
      if (apiKey) sessionStorage.setItem(KEY_STORAGE, apiKey);
      else sessionStorage.removeItem(KEY_STORAGE);
      caller = undefined;
      showKeyStatus();
      readCaller();
      route();
      follow();
    });
    $('forget-key').addEventListener('click', function () {
      apiKey = '';
      sessionStorage.removeItem(KEY_STORAGE);
      showKeyStatus();
    });
    $('search-kind').addEventListener('change', function () {
      $('search-id').placeholder =
        $('search-kind').value === 'run' ? 'run id, e.g. run_81' : 'operation_ref, e.g. run_81/step_4';
    });
    $('search-form').addEventListener('submit', function (event) {
      event.preventDefault();
      var id = $('search-id').value.trim();
      if (!id) return;
      go('#/' + $('search-kind').value + '/' + segment(id));
    });
    $('show-trust').addEventListener('click', function () {
      go('#/trust');
    });
    $('copy-ref').addEventListener('click', function () {
      var ref = $('op-title').textContent;
      var done = function () {
        $('copy-ref').textContent = 'Copied';
        setTimeout(function () {
          $('copy-ref').textContent = 'Copy ref';
        }, 1500);
      };
      if (navigator.clipboard && navigator.clipboard.writeText)
        navigator.clipboard.writeText(ref).then(done, function () {});
    });
    $('toggle-raw').addEventListener('click', function () {
      var raw = $('raw-events');
      raw.hidden = !raw.hidden;
      $('toggle-raw').setAttribute('aria-pressed', String(!raw.hidden));
    });
    $('approval-form').addEventListener('submit', submitApproval);
    $('bulk-ack').addEventListener('click', function () {
      bulkAct('ack');
    });
    $('bulk-cancel').addEventListener('click', function () {
      bulkAct('cancel');
    });
    bindFilters('triage-filters', 'triage');
    // On a phone the queue comes first: its filters and counts fold behind one control.
    var narrow = window.matchMedia('(max-width: 760px)');
    var fold = function () {
      $('triage-refine').open = !narrow.matches;
    };
    fold();
    narrow.addEventListener('change', fold);
    bindFilters('operations-filters', 'operations');
    bindFilters('runs-filters', 'runs');
    window.addEventListener('hashchange', function () {
      route();
    });
    showKeyStatus();
    readCaller();
    route();
    follow();
  });
})();
