/*
 * Live: follow the log with a long poll on /v1/changes and redraw what is shown when it moves. While
 * the ledger does not answer, page-status.js says so and the poll retries at once.
 */
import { api, ApiError } from './api-client.js';
import { fresh, loaded, outage, say, setOutage, showFreshness, showOutage } from './page-status.js';
import { current } from './address.js';
import { openRef, readHolder, renderHolder } from './operation-view.js';
import { route } from './router.js';

var LIVE_WAIT_MS = 15000;
var OUTAGE_RETRY_MS = 500;

var following = 0;
var followed;

export function follow() {
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
          setOutage(undefined);
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
            setOutage({ since: new Date(), status: error instanceof ApiError ? error.status : undefined });
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
