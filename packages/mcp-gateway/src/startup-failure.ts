/**
 * A gateway that cannot start still answers the host's `initialize`, with the reason as the
 * JSON-RPC error. A host shows that error to its user; a process that just exits shows as
 * "Connection closed", which says nothing (docs/mcp-gateway.md, "When the gateway cannot start").
 */
import { ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import type { Readable, Writable } from 'node:stream';

export interface RefuseOptions {
  input?: Readable & { isTTY?: boolean };
  output?: Writable;
  /** How long to wait for the host's first request before giving up on answering it. */
  waitMs?: number;
}

/**
 * Reads the stdio protocol stream (one JSON-RPC message a line) and answers every request with
 * the reason until `initialize` was answered, the stream ended, or `waitMs` passed. A terminal on
 * stdin is no host: nothing is waited for.
 */
export async function refuseInitialize(reason: string, options: RefuseOptions = {}): Promise<void> {
  const input = options.input ?? process.stdin;
  const output = options.output ?? process.stdout;
  if (input.isTTY) return;
  await new Promise<void>((resolve) => {
    let buffered = '';
    const finish = () => {
      clearTimeout(timer);
      input.off('data', onData);
      input.off('end', finish);
      input.off('close', finish);
      input.pause();
      resolve();
    };
    const timer = setTimeout(finish, options.waitMs ?? 10_000);
    const onData = (chunk: Buffer | string) => {
      buffered += chunk.toString();
      let newline: number;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline).trim();
        buffered = buffered.slice(newline + 1);
        let message: { id?: unknown; method?: unknown };
        try {
          message = JSON.parse(line) as { id?: unknown; method?: unknown };
        } catch {
          continue;
        }
        // Notifications (no id) need no answer; every request gets the reason.
        if (
          message === null ||
          typeof message !== 'object' ||
          typeof message.method !== 'string' ||
          message.id === undefined
        )
          continue;
        output.write(
          `${JSON.stringify({ jsonrpc: '2.0', id: message.id, error: { code: ErrorCode.InternalError, message: reason } })}\n`,
        );
        if (message.method === 'initialize') return void output.write('', () => finish());
      }
    };
    input.on('data', onData);
    input.once('end', finish);
    input.once('close', finish);
  });
}
