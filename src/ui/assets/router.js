/* From the address to the view that draws it; filter forms and the search go through the hash. */
import { $ } from './dom.js';
import { current } from './address.js';
import { openOperation } from './operation-view.js';
import { openTriage } from './triage-view.js';
import { openOperations } from './operations-view.js';
import { openRuns } from './runs-view.js';
import { openRun } from './run-view.js';
import { openTrust } from './trust-view.js';
import { openWebhooks } from './webhooks-view.js';

export function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

export function bindFilters(formId, view) {
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

export function route(quiet) {
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
