/*
 * Trust metrics (GET /v1/metrics/trust), overall and per tool; each figure opens the operations it
 * counts.
 */
import { duration } from './format.js';
import { $, cell, clear, h, tile } from './dom.js';
import { allPages } from './api-client.js';
import { explain, loaded, say } from './page-status.js';
import { queryHash, show } from './address.js';

/** A figure that opens the operations it counts (a zero opens nothing). */
function countLink(count, filters) {
  return count ? h('a', { href: queryHash('operations', filters, {}), text: count }) : String(count);
}

export function openTrust(quiet) {
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
