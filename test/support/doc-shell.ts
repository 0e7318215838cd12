/**
 * Reads the shell examples of a document the way a reader's shell would: a block is run by bash
 * with `curl` and `node` replaced by functions that record their arguments, so variables and quoting
 * are expanded exactly as written, and the test then performs each call itself, against services
 * it started on free ports.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface ShellCall {
  command: 'curl' | 'node';
  args: string[];
}

export interface CurlCall {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
}

/** The fenced blocks of a markdown text, in order, with the language after the fence. */
export function fencedBlocks(markdown: string): Array<{ lang: string; text: string }> {
  return [...markdown.matchAll(/```(\w*)\n([\s\S]*?)```/g)].map((match) => ({ lang: match[1], text: match[2] }));
}

/**
 * The recorded calls of a block, in order. Nothing else in the block runs: PATH is empty, so every
 * other command (npm, git, sleep) is not found and ignored, `kill` is a no-op, and the shell runs
 * in an empty temporary folder, where a stray redirection can write nothing that matters.
 */
export function recordedCalls(script: string): ShellCall[] {
  const recorder = [
    `curl() { printf 'curl\\0'; printf '%s\\0' "$@"; printf '\\n--end--\\0'; }`,
    `node() { printf 'node\\0'; printf '%s\\0' "$@"; printf '\\n--end--\\0'; }`,
    'command_not_found_handle() { return 0; }',
    'kill() { :; }',
    '',
  ].join('\n');
  const sandbox = mkdtempSync(join(tmpdir(), 'doc-shell-'));
  let output: string;
  try {
    output = execFileSync('/bin/bash', ['--norc', '--noprofile', '-c', recorder + script], {
      encoding: 'utf8',
      cwd: sandbox,
      env: { PATH: '', HOME: sandbox },
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 10_000,
    });
  } finally {
    rmSync(sandbox, { recursive: true, force: true });
  }
  return output
    .split('\n--end--\0')
    .filter((chunk) => chunk.length > 0)
    .map((chunk) => {
      const [command, ...args] = chunk.split('\0');
      return {
        command: command as ShellCall['command'],
        args: args.filter((arg, i) => i < args.length - 1 || arg !== ''),
      };
    });
}

export function asCurl(call: ShellCall): CurlCall {
  const curl: CurlCall = { method: 'GET', url: '', headers: {} };
  for (let i = 0; i < call.args.length; i++) {
    const arg = call.args[i];
    if (arg === '-s') continue;
    if (arg.startsWith('-X')) curl.method = arg.length > 2 ? arg.slice(2) : call.args[++i];
    else if (arg === '-H') {
      const [name, ...value] = call.args[++i].split(':');
      curl.headers[name.trim()] = value.join(':').trim();
    } else if (arg === '-d') {
      curl.body = call.args[++i];
      if (curl.method === 'GET') curl.method = 'POST';
    } else curl.url = arg;
  }
  return curl;
}
