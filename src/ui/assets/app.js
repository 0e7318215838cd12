/*
 * The incident review page. Plain browser JavaScript, served as is (no build step).
 *
 * Every figure on the page comes from the public /v1 API, fetched with the key the reviewer typed
 * in. The key lives in this tab's sessionStorage and in memory, goes out only in the
 * Authorization header, and never enters a URL (the hash holds only what is being looked at).
 * All server data is put into the page with textContent, never as HTML.
 */
(function () {
  'use strict';

  var KEY_STORAGE = 'recovery-ledger.api-key';
  var apiKey = sessionStorage.getItem(KEY_STORAGE) || '';

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
      element.appendChild(typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child);
    }
    return element;
  }

  function clear(element) {
    while (element.firstChild) element.removeChild(element.firstChild);
    return element;
  }

  function badge(status) {
    return h('span', { className: 'badge status-' + String(status).replace(/[^a-z_]/g, ''), text: status });
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

  // ---- the API ----------------------------------------------------------------------------------

  function ApiError(status, problem) {
    this.status = status;
    this.code = (problem && problem.code) || 'HTTP_' + status;
    this.detail = (problem && (problem.detail || problem.title)) || '';
  }

  function api(path, query) {
    var url = path;
    if (query) {
      var params = new URLSearchParams();
      Object.keys(query).forEach(function (name) {
        if (query[name] !== undefined) params.set(name, String(query[name]));
      });
      var text = params.toString();
      if (text) url += '?' + text;
    }
    var headers = { accept: 'application/json' };
    if (apiKey) headers.authorization = 'Bearer ' + apiKey;
    return fetch(url, { headers: headers, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer' }).then(function (response) {
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

  // ---- messages ---------------------------------------------------------------------------------

  function say(text, kind) {
    var box = $('message');
    box.textContent = text;
    box.className = 'message ' + (kind || 'info');
    box.hidden = !text;
  }

  function explain(error, what) {
    if (!(error instanceof ApiError)) return say('Could not reach the ledger: ' + (error && error.message ? error.message : String(error)), 'error');
    if (error.status === 401) return say('The ledger needs an API key for this. Enter one above (' + error.code + ').', 'error');
    if (error.status === 403) return say('This key may not read ' + what + ' (' + error.code + ': ' + error.detail + ').', 'error');
    if (error.status === 404) return say('No ' + what + ' found for this key\u2019s tenant (' + error.code + ').', 'error');
    return say(error.code + ': ' + error.detail, 'error');
  }

  // ---- views ------------------------------------------------------------------------------------

  var VIEWS = ['welcome', 'operation-view', 'run-view', 'trust-view'];

  function show(view) {
    VIEWS.forEach(function (id) {
      $(id).hidden = id !== view;
    });
  }

  function go(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
  }

  /** The state after each event, from the stream itself: status changes only with TransitionRecorded. */
  function statesAfter(events) {
    var status = 'unplanned';
    return events.map(function (event) {
      if (event.type === 'StepPlanned' && status === 'unplanned') status = 'planned';
      if (event.type === 'TransitionRecorded' && event.data && event.data.to) status = event.data.to;
      return status;
    });
  }

  function whyOf(event) {
    var data = event.data || {};
    switch (event.type) {
      case 'TransitionRecorded':
        return data.reason + (data.directive ? ' \u2192 next ' + data.directive.next_action : '');
      case 'DispatchRefused':
        return data.code;
      case 'EnvelopeRecorded':
        return data.envelope && data.envelope.ok ? 'COMMITTED' : data.envelope && data.envelope.code;
      case 'VerificationRecorded':
        return data.outcome;
      case 'ApprovalRecorded':
        return data.decision;
      default:
        return '';
    }
  }

  var KIND_OF = {
    StepPlanned: 'plan',
    AttemptDispatched: 'attempt',
    EnvelopeRecorded: 'envelope',
    DispatchRefused: 'refusal',
    VerificationRecorded: 'verification',
    ApprovalRecorded: 'approval',
    TransitionRecorded: 'transition',
  };

  var TERMINAL = { succeeded: true, escalated: true };

  /** Spans of time the step spent in each state, from the recorded_at of the transitions. */
  function stateSpans(events, states) {
    var spans = [];
    events.forEach(function (event, index) {
      var status = states[index];
      var current = spans[spans.length - 1];
      if (current && current.status === status) return;
      if (current) current.to = event.recorded_at;
      spans.push({ status: status, from: event.recorded_at });
    });
    return spans.filter(function (span) {
      return span.status !== 'unplanned';
    });
  }

  function renderStateTimes(spans) {
    var box = clear($('state-times'));
    var now = Date.now();
    var durations = spans.map(function (span) {
      return span.to ? Date.parse(span.to) - Date.parse(span.from) : TERMINAL[span.status] ? 0 : Math.max(0, now - Date.parse(span.from));
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
        h('div', { className: 'state-time' }, badge(span.status), h('div', { className: 'bar-track' }, bar), h('span', { className: 'state-duration', text: label })),
      );
    });
  }

  function renderVerdict(evidence, rowsByEventId) {
    if (!evidence) {
      $('verdict-statement').textContent = 'The evidence trail is not projected yet; reload in a moment.';
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
              row.click();
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

  function toggleDetail(ref, event, row) {
    var next = row.nextElementSibling;
    if (next && next.classList.contains('detail')) {
      next.parentNode.removeChild(next);
      row.classList.remove('selected');
      return;
    }
    var stateBox = h('div', { className: 'as-of' }, h('p', { className: 'muted', text: 'Loading the state at revision ' + event.revision + '\u2026' }));
    var cell = h(
      'td',
      { colspan: 6 },
      h(
        'div',
        { className: 'detail-grid' },
        h('div', {}, h('h4', { text: 'State as of revision ' + event.revision }), stateBox),
        h('div', {}, h('h4', { text: event.type + ' data' }), h('pre', { text: JSON.stringify(event.data, null, 2) })),
      ),
      h('p', { className: 'muted small', text: 'event ' + event.event_id + ' \u00b7 position ' + event.position + ' \u00b7 actor ' + event.actor + (event.causation_event_id ? ' \u00b7 caused by ' + event.causation_event_id : '') + ' \u00b7 hash ' + event.hash }),
    );
    row.classList.add('selected');
    row.parentNode.insertBefore(h('tr', { className: 'detail' }, cell), row.nextSibling);
    api('/v1/operations/' + segment(ref) + '/events', { as_of_revision: event.revision }).then(
      function (answer) {
        clear(stateBox).appendChild(stateSummary(answer.state));
      },
      function (error) {
        clear(stateBox).appendChild(h('p', { className: 'error', text: error.code ? error.code + ': ' + error.detail : String(error) }));
      },
    );
  }

  function openOperation(ref) {
    say('Loading ' + ref + '\u2026');
    var base = '/v1/operations/' + segment(ref);
    return Promise.all([api(base), api(base + '/events')])
      .then(function (answers) {
        var state = answers[0];
        var stream = answers[1];
        var last = stream.events[stream.events.length - 1];
        // Read-your-writes: the trail is asked for at least the position of the last event shown.
        var evidence = allPages(base + '/evidence', { wait_for_position: last.position, wait_timeout_ms: 3000 }, 'entries').catch(function (error) {
          if (error instanceof ApiError && error.code === 'PROJECTION_LAGGING') return undefined;
          throw error;
        });
        return evidence.then(function (trail) {
          renderOperation(ref, state, stream.events, trail);
          say('');
        });
      })
      .catch(function (error) {
        show('welcome');
        explain(error, 'operation ' + ref);
      });
  }

  function renderOperation(ref, state, events, evidence) {
    show('operation-view');
    $('op-title').textContent = ref;
    var status = $('op-status');
    status.textContent = state.status;
    status.className = 'badge status-' + state.status;
    var runLink = state.run_id ? h('a', { href: '#/run/' + segment(state.run_id), text: state.run_id }) : undefined;
    facts($('op-facts'), [
      ['Tool', state.tool],
      ['Side effect', state.side_effect],
      ['Run', runLink],
      ['Attempts', state.attempts_used + ' used, ' + state.attempts_remaining + ' remaining'],
      ['Reason', state.reason],
      ['Since', time(state.since)],
      ['Revision', state.revision],
    ]);

    var summaries = {};
    ((evidence && evidence.entries) || []).forEach(function (entry) {
      summaries[entry.event_id] = entry.summary;
    });
    var states = statesAfter(events);
    var body = clear($('timeline').tBodies[0]);
    var rowsByEventId = {};
    var start = events.length ? Date.parse(events[0].recorded_at) : 0;
    events.forEach(function (event, index) {
      var kind = KIND_OF[event.type] || 'other';
      var row = h(
        'tr',
        {
          className: 'event kind-' + kind,
          tabindex: 0,
          'data-revision': event.revision,
          'data-event-id': event.event_id,
        },
        h('td', { className: 'num', text: event.revision }),
        h('td', { className: 'when' }, h('span', { text: time(event.recorded_at) }), h('span', { className: 'offset', text: '+' + duration(Date.parse(event.recorded_at) - start) })),
        h('td', {}, h('span', { className: 'kind kind-' + kind, text: kind }), ' ', h('span', { className: 'type', text: event.type })),
        h('td', { text: summaries[event.event_id] || event.type }),
        h('td', {}, badge(states[index])),
        h('td', { className: 'why', text: whyOf(event) || '' }),
      );
      row.addEventListener('click', function () {
        toggleDetail(ref, event, row);
      });
      row.addEventListener('keydown', function (key) {
        if (key.key === 'Enter' || key.key === ' ') {
          key.preventDefault();
          toggleDetail(ref, event, row);
        }
      });
      rowsByEventId[event.event_id] = row;
      body.appendChild(row);
    });
    renderVerdict(evidence, rowsByEventId);
    renderStateTimes(stateSpans(events, states));
  }

  function openRun(runId) {
    say('Loading run ' + runId + '\u2026');
    return allPages('/v1/runs/' + segment(runId), {}, 'steps')
      .then(function (run) {
        show('run-view');
        say('');
        $('run-title').textContent = 'Run ' + run.run_id;
        var open = $('run-open');
        open.textContent = run.open === 0 ? 'all ' + run.total + ' steps settled' : run.open + ' of ' + run.total + ' steps open';
        open.className = 'badge ' + (run.open === 0 ? 'status-succeeded' : 'status-verifying');
        var chips = clear($('run-counts'));
        Object.keys(run.counts).forEach(function (status) {
          chips.appendChild(h('span', { className: 'chip' }, badge(status), ' ' + run.counts[status]));
        });
        var body = clear($('run-steps').tBodies[0]);
        run.steps.forEach(function (step) {
          body.appendChild(
            h(
              'tr',
              {},
              h('td', {}, h('a', { href: '#/operation/' + segment(step.operation_ref), text: step.operation_ref })),
              h('td', { text: step.tool }),
              h('td', { text: step.side_effect }),
              h('td', {}, badge(step.status)),
              h('td', { className: 'num', text: step.attempts_used }),
              h('td', { text: time(step.since) }),
              h('td', { className: 'why', text: step.reason }),
            ),
          );
        });
      })
      .catch(function (error) {
        show('welcome');
        explain(error, 'run ' + runId);
      });
  }

  function tile(label, value, note) {
    return h('div', { className: 'tile' }, h('div', { className: 'tile-value', text: value }), h('div', { className: 'tile-label', text: label }), note ? h('div', { className: 'tile-note', text: note }) : null);
  }

  function openTrust() {
    say('Loading trust metrics\u2026');
    return allPages('/v1/metrics/trust', {}, 'tools')
      .then(function (trust) {
        show('trust-view');
        say('');
        var o = trust.overall;
        var tiles = clear($('trust-overall'));
        tiles.appendChild(tile('Unknown outcomes', o.unknown_outcomes, o.unknown_via_envelope + ' from envelopes, ' + o.unknown_in_flight + ' in flight'));
        tiles.appendChild(tile('Resolved by lookup', o.resolved_by_verification, o.verified_found_committed + ' committed, ' + o.verified_not_found + ' not found, ' + o.lookup_unavailable + ' lookups unavailable'));
        tiles.appendChild(tile('Duplicate writes prevented', o.duplicate_writes_prevented));
        tiles.appendChild(tile('Identical retries blocked', o.identical_retries_blocked));
        tiles.appendChild(tile('Unverified dispatches refused', o.unverified_dispatches_refused));
        tiles.appendChild(tile('Terminal escalations', o.terminal_escalations));
        tiles.appendChild(tile('Pending recovery now', o.pending_recovery_now));
        tiles.appendChild(
          tile(
            'Time in pending recovery',
            o.pending_recovery.count ? duration(o.pending_recovery.p90_ms) + ' p90' : '\u2013',
            o.pending_recovery.count ? o.pending_recovery.count + ' resolved, median ' + duration(o.pending_recovery.p50_ms) + ', max ' + duration(o.pending_recovery.max_ms) : 'none resolved yet',
          ),
        );
        var body = clear($('trust-tools').tBodies[0]);
        trust.tools.forEach(function (t) {
          body.appendChild(
            h(
              'tr',
              {},
              h('td', { text: t.tool }),
              h('td', { className: 'num', text: t.operations_planned }),
              h('td', { className: 'num', text: t.unknown_outcomes }),
              h('td', { className: 'num', text: t.resolved_by_verification }),
              h('td', { className: 'num', text: t.duplicate_writes_prevented }),
              h('td', { className: 'num', text: t.identical_retries_blocked }),
              h('td', { className: 'num', text: t.terminal_escalations }),
              h('td', { className: 'num', text: t.pending_recovery_now }),
              h('td', { className: 'num', text: t.pending_recovery.count ? duration(t.pending_recovery.p90_ms) : '\u2013' }),
            ),
          );
        });
      })
      .catch(function (error) {
        show('welcome');
        explain(error, 'trust metrics');
      });
  }

  // ---- routing: the hash names what is shown, never who is looking ----------------------------------

  function route() {
    var hash = location.hash.replace(/^#\/?/, '');
    var slash = hash.indexOf('/');
    var view = slash < 0 ? hash : hash.slice(0, slash);
    var id = slash < 0 ? '' : decodeURIComponent(hash.slice(slash + 1));
    if (view === 'operation' && id) {
      $('search-kind').value = 'operation';
      $('search-id').value = id;
      return openOperation(id);
    }
    if (view === 'run' && id) {
      $('search-kind').value = 'run';
      $('search-id').value = id;
      return openRun(id);
    }
    if (view === 'trust') return openTrust();
    show('welcome');
    say('');
  }

  function showKeyStatus() {
    $('key-status').textContent = apiKey ? 'key set for this tab' : 'no key';
  }

  document.addEventListener('DOMContentLoaded', function () {
    $('key-form').addEventListener('submit', function (event) {
      event.preventDefault();
      var input = $('api-key');
      apiKey = input.value.trim();
      input.value = '';
      if (apiKey) sessionStorage.setItem(KEY_STORAGE, apiKey);
      else sessionStorage.removeItem(KEY_STORAGE);
      showKeyStatus();
      route();
    });
    $('forget-key').addEventListener('click', function () {
      apiKey = '';
      sessionStorage.removeItem(KEY_STORAGE);
      showKeyStatus();
    });
    $('search-kind').addEventListener('change', function () {
      $('search-id').placeholder = $('search-kind').value === 'run' ? 'run id, e.g. run_81' : 'operation_ref, e.g. run_81/step_4';
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
    window.addEventListener('hashchange', route);
    showKeyStatus();
    route();
  });
})();
