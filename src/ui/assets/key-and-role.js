/*
 * The API key typed in and the role it has. The key lives in this tab's sessionStorage and in
 * memory, goes out only in the Authorization header (api-client.js), and never enters a URL.
 */
import { $ } from './dom.js';

var KEY_STORAGE = 'recovery-ledger.api-key';
export var apiKey = sessionStorage.getItem(KEY_STORAGE) || '';

/** The role of the key in use, from GET /v1/whoami; undefined until known. */
export var caller;

/** The key typed in, kept for this tab; an empty one clears it. */
export function useKey(key) {
  apiKey = key;
  if (apiKey) sessionStorage.setItem(KEY_STORAGE, apiKey);
  else sessionStorage.removeItem(KEY_STORAGE);
}

export function forgetKey() {
  apiKey = '';
  sessionStorage.removeItem(KEY_STORAGE);
}

export function setCaller(me) {
  caller = me;
}

export function showKeyStatus() {
  $('key-status').textContent = apiKey ? 'key set for this tab' : 'no key';
  var role = $('key-role');
  role.hidden = !caller;
  if (caller)
    role.textContent = caller.local ? 'local mode: every role' : 'role ' + caller.role + ', tenant ' + caller.tenant;
}
