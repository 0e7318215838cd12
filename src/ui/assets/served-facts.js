/*
 * The facts the served ledger takes, read from the OpenAPI document it serves (/docs/openapi.json,
 * generated from each fact's one definition, SUBMITTED_FACTS in packages/core), so the console holds
 * no list of its own: an operator's action is offered only for a fact the ledger lists as one
 * `POST /v1/operator-facts` takes (docs/contract.md §4.10).
 */

/** The operator facts a document lists: the types its operator-facts body tells apart. */
export function operatorFactsOf(document) {
  var fact = document.components.schemas.OperatorFactsDto.properties.fact;
  return Object.keys(fact.discriminator.mapping);
}

var served;

/**
 * How long an operation's page waits for the document. The page draws only once it has it, so a
 * slow or stalled read must end in the fallback below rather than hold the page; the ledger serves
 * it from memory, built at start.
 */
var READ_LIMIT_MS = 5000;

/**
 * Read once per page. A document that cannot be read in time (none generated, a stalled request)
 * answers null, and the console offers its actions unfiltered: the ledger still refuses a fact it
 * does not take. The next operation opened asks again.
 */
export function operatorFacts() {
  if (!served) {
    var stop = new AbortController();
    var timer = setTimeout(function () {
      stop.abort();
    }, READ_LIMIT_MS);
    served = fetch('/docs/openapi.json', { credentials: 'omit', referrerPolicy: 'no-referrer', signal: stop.signal })
      .then(function (response) {
        return response.ok ? response.json() : Promise.reject(new Error('HTTP ' + response.status));
      })
      .then(operatorFactsOf)
      .catch(function () {
        served = undefined;
        return null;
      })
      .finally(function () {
        clearTimeout(timer);
      });
  }
  return served;
}
