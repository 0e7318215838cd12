/**
 * The grammar of identifier fields (run_id, tool, input_hash, verification_tool): ASCII letters,
 * digits and `_ . : / @ + = # ~ -`, starting with a letter, a digit or `_`. They are stored as sent,
 * end up in stream names, indexes, metric labels and the page, and are never redacted; no space,
 * quote, bracket, backslash or control character can make one read as something else. The edge
 * validates with it (src/http/dto) and the OpenAPI document publishes it (src/openapi).
 */
export const IDENTIFIER_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.:/@+=#~-]*$/;
