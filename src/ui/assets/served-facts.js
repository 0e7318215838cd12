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
 * Read once per page. A document that cannot be read (none generated) answers null, and the
 * console offers its actions unfiltered: the ledger still refuses a fact it does not take.
 */
export function operatorFacts() {
  if (!served)
    served = fetch('/docs/openapi.json', { credentials: 'omit', referrerPolicy: 'no-referrer' })
      .then(function (response) {
        return response.ok ? response.json() : Promise.reject(new Error('HTTP ' + response.status));
      })
      .then(operatorFactsOf)
      .catch(function () {
        served = undefined;
        return null;
      });
  return served;
}
