/**
 * Preloaded (`node --require`) into a build script under test: writes to COMPILER_WATCH_FILE, as
 * the process exits, every compiler it resolved (to load it, or to spawn its bin), so a test can
 * tell that a start compiled nothing without timing it.
 */
'use strict';
const Module = require('node:module');
const { writeFileSync } = require('node:fs');

const COMPILERS = /^(?:typescript|tsup|@swc\/core)(?:\/|$)/;
const resolved = [];
const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (COMPILERS.test(request)) resolved.push(request);
  return resolveFilename.call(this, request, ...rest);
};
process.on('exit', () => writeFileSync(process.env.COMPILER_WATCH_FILE, JSON.stringify(resolved)));
