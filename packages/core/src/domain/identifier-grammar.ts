/**
 * The grammar of identifier fields (run_id, tool, input_hash, verification_tool): ASCII letters,
 * digits and `_ . : / @ + = # ~ -`, starting with a letter, a digit or `_`. They are stored as sent,
 * end up in stream names, indexes, metric labels and the page, and are never redacted; no space,
 * quote, bracket, backslash or control character can make one read as something else. The edge
 * validates with it (the fact schemas of ../facts) and the OpenAPI document publishes it.
 */
export const IDENTIFIER_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.:/@+=#~-]*$/;

/**
 * A client's event_id must not be a version 8 UUID: version 8 is what the ledger derives its own
 * ids as (src/ledger/event-ids.ts), and a client id of that version could collide with one. Written
 * without flags, so the OpenAPI document publishes it, and the submit route reads it, as it is.
 */
export const CLIENT_EVENT_ID_PREFIX = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[^8]/;
