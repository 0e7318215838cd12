/* Parts every list page shares: its filter form, its "more" button, the holders of its steps. */
import { $ } from './dom.js';
import { api } from './api-client.js';
import { explain } from './page-status.js';

export function fillForm(form, filters) {
  Array.prototype.forEach.call(form.elements, function (field) {
    if (!field.name) return;
    if (field.type === 'checkbox') field.checked = filters[field.name] === field.value;
    else field.value = filters[field.name] || '';
  });
}

var lists = {};

/**
 * "held by <worker>" on the rows of a list page whose steps a worker may be acting on, from one
 * read for the whole page (GET /v1/leases), never one per row. A failed read labels nothing.
 */
export function labelHolders(body, refs) {
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

export function setMore(buttonId, cursor, loadMore) {
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
