/**
 * The one runtime global the core uses beyond ECMAScript: base64 decoding, present in Node, Deno,
 * Bun and browsers alike. Declared here so the core compiles without Node's or the DOM's types.
 */
declare function atob(data: string): string;
