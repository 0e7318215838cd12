#!/usr/bin/env node
/**
 * The agent frameworks @recovery-ledger/agent-frameworks wraps (the Vercel AI SDK, the OpenAI
 * Agents SDK, LangChain/LangGraph, Mastra) are its optional peers, not the repository's
 * dependencies: the root `npm ci` installs none of them (several require a newer Node than the
 * oldest one the service runs on). Their tests, the integration's own build and the examples that
 * use them read them from test/frameworks/, a project of its own with its own lock file.
 *
 * `node scripts/frameworks.cjs` installs that project (`npm ci`) when its node_modules is missing
 * or was installed from another lock file, and does nothing otherwise. Plain Node, no dependency.
 * Required by the build and the test setups, it exports where the frameworks are and whether they
 * are installed.
 */
'use strict';
const { spawnSync } = require('node:child_process');
const { createHash } = require('node:crypto');
const { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

const PROJECT = join(__dirname, '..', 'test', 'frameworks');
const MODULES = join(PROJECT, 'node_modules');
/** The hash of the lock file node_modules was installed from. */
const STAMP = join(MODULES, '.installed-from-lock');
const LOCK_DIR = join(PROJECT, '.installing');

function lockHash() {
  return createHash('sha256')
    .update(readFileSync(join(PROJECT, 'package-lock.json')))
    .digest('hex');
}

function isInstalled() {
  return existsSync(STAMP) && readFileSync(STAMP, 'utf8').trim() === lockHash();
}

function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Installs test/frameworks once per lock file; concurrent callers wait for the one that installs. */
function ensureFrameworks() {
  if (isInstalled()) return;
  for (;;) {
    try {
      mkdirSync(LOCK_DIR);
      break;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
      sleep(500);
      if (isInstalled()) return;
    }
  }
  try {
    if (isInstalled()) return;
    process.stderr.write(
      'recovery-ledger: installing the agent frameworks the integrations are tested in (test/frameworks, npm ci)\n',
    );
    // npm's output (engine warnings: some frameworks want Node 22) is shown only when the install fails.
    const result = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], {
      cwd: PROJECT,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, npm_config_update_notifier: 'false' },
    });
    if (result.status !== 0) {
      process.stderr.write(`${result.stdout ?? ''}${result.stderr ?? ''}`);
      throw new Error(`npm ci in test/frameworks failed (exit ${result.status ?? result.signal})`);
    }
    writeFileSync(STAMP, `${lockHash()}\n`);
  } finally {
    rmSync(LOCK_DIR, { recursive: true, force: true });
  }
}

if (require.main === module) {
  try {
    ensureFrameworks();
  } catch (error) {
    process.stderr.write(`recovery-ledger: ${error.message}\n`);
    process.exit(1);
  }
} else {
  module.exports = { FRAMEWORK_MODULES: MODULES, ensureFrameworks, isInstalled };
}
