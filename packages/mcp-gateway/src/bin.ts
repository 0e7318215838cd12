#!/usr/bin/env node
/**
 * `recovery-ledger-mcp-gateway --config gateway.json`: the gateway as a host's MCP server, without
 * the ledger server's CLI (docs/mcp-gateway.md). Exit codes as the server CLI's: 2 a configuration
 * or usage error, 3 upstream servers that did not start, 1 anything else.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { GatewayStartError, serveGatewayOnStdio } from './serve-stdio';

const USAGE = `Usage: recovery-ledger-mcp-gateway --config <file> [--url <ledger url>] [--key <api key>]

Serves an MCP gateway on stdio: upstream MCP tools pass through, write tools run through the
Recovery Ledger. --url and --key default to LEDGER_URL and LEDGER_API_KEY.
`;

const EXIT = { ok: 0, failure: 1, usage: 2, unavailable: 3 } as const;

async function main(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        config: { type: 'string', short: 'c' },
        url: { type: 'string' },
        key: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'V' },
      },
      strict: true,
    }));
  } catch (error) {
    process.stderr.write(`recovery-ledger-mcp-gateway: ${(error as Error).message}\n${USAGE}`);
    return EXIT.usage;
  }
  if (values.help) return (void process.stdout.write(USAGE), EXIT.ok);
  if (values.version) {
    // Read at run time from the installed package, so the answer is the version installed.
    const { version } = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as { version: string };
    return (void process.stdout.write(`${version}\n`), EXIT.ok);
  }
  if (!values.config) {
    process.stderr.write(`recovery-ledger-mcp-gateway: --config is required\n${USAGE}`);
    return EXIT.usage;
  }
  const ledgerUrl = values.url ?? process.env.LEDGER_URL;
  const apiKey = values.key ?? process.env.LEDGER_API_KEY;
  try {
    await serveGatewayOnStdio({
      config: values.config,
      ...(ledgerUrl ? { ledgerUrl } : {}),
      ...(apiKey ? { apiKey } : {}),
    });
    return EXIT.ok;
  } catch (error) {
    process.stderr.write(`recovery-ledger-mcp-gateway: ${error instanceof Error ? error.message : String(error)}\n`);
    if (error instanceof GatewayStartError) return error.reason === 'configuration' ? EXIT.usage : EXIT.unavailable;
    return EXIT.failure;
  }
}

void main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
