/**
 * Serving the gateway on stdio, for both the package's own `recovery-ledger-mcp-gateway` bin and the
 * server CLI's `recovery-ledger mcp-gateway` command: the host starts one of them as its MCP server,
 * and the gateway starts (or reaches) the upstream servers named in its configuration
 * (docs/mcp-gateway.md).
 */
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { GatewayConfigError, loadGatewayConfig } from './gateway-config';
import { McpGateway } from './mcp-gateway';
import { refuseInitialize } from './startup-failure';

export interface ServeOptions {
  /** Path of the gateway configuration (JSON). */
  config: string;
  /** A ledger URL that overrides the configuration's (`--url`). */
  ledgerUrl?: string;
  /** A ledger API key that overrides the configuration's (`--key`). */
  apiKey?: string;
  env?: NodeJS.ProcessEnv;
}

/** Why the gateway did not start: a configuration to fix, or upstream servers that did not start. */
export class GatewayStartError extends Error {
  override readonly name = 'GatewayStartError';
  constructor(
    message: string,
    readonly reason: 'configuration' | 'upstream',
  ) {
    super(message);
  }
}

/** stdout is the host's protocol stream: every log line goes to stderr, as JSON. */
const log = (line: Record<string, unknown>) =>
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), ...line })}\n`);

/**
 * The host hears why before the process exits: its initialize is answered with the reason, which
 * the caller then prints on stderr with its exit code.
 */
async function cannotStart(error: GatewayStartError): Promise<GatewayStartError> {
  await refuseInitialize(`recovery-ledger mcp-gateway cannot start: ${error.message}`);
  return error;
}

/** Serves the gateway on stdio until the host closes it, or SIGTERM/SIGINT. */
export async function serveGatewayOnStdio(options: ServeOptions): Promise<void> {
  let config;
  try {
    config = loadGatewayConfig(
      options.config,
      options.env ?? process.env,
      options.ledgerUrl ? { ledgerUrl: options.ledgerUrl } : {},
    );
  } catch (error) {
    if (error instanceof GatewayConfigError)
      throw await cannotStart(new GatewayStartError(error.message, 'configuration'));
    throw error;
  }
  // --url / --key (or LEDGER_URL / LEDGER_API_KEY through them) point a configuration at another ledger.
  if (options.apiKey) config.ledger.api_key = options.apiKey;

  const gateway = new McpGateway(config, log);
  try {
    await gateway.start();
  } catch (error) {
    await gateway.close();
    const reason = error instanceof Error ? error.message : String(error);
    throw await cannotStart(new GatewayStartError(`the upstream servers could not be started: ${reason}`, 'upstream'));
  }
  const transport = new StdioServerTransport();
  const server = gateway.server();
  const closed = new Promise<void>((resolve) => {
    server.onclose = () => resolve();
    process.stdin.once('end', () => resolve());
    process.once('SIGTERM', () => resolve());
    process.once('SIGINT', () => resolve());
  });
  await server.connect(transport);
  log({
    event: 'started',
    ledger: config.ledger.url,
    // No key is right for a ledger in local mode; one that needs keys answers LEDGER_UNAUTHORIZED.
    ledger_key: config.ledger.api_key ? 'set' : 'none',
    servers: Object.keys(config.servers),
    write_tools: Object.keys(config.write_tools),
  });
  await closed;
  await server.close().catch(() => undefined);
  await gateway.close();
}
