import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { GatewayConfigError, loadGatewayConfig } from '../../mcp-gateway/gateway-config';
import { McpGateway } from '../../mcp-gateway/mcp-gateway';
import { refuseInitialize } from '../../mcp-gateway/startup-failure';
import { CliError, EXIT, usageError } from '../cli-errors';
import type { GlobalOptions } from '../ledger-source';

export interface McpGatewayOptions {
  config: string;
}

/** stdout is the host's protocol stream: every log line goes to stderr, as JSON. */
const log = (line: Record<string, unknown>) => process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), ...line })}\n`);

/**
 * The host hears why before the process exits: its initialize is answered with the reason, which
 * the CLI then prints on stderr with the exit code.
 */
async function cannotStart(error: CliError): Promise<CliError> {
  await refuseInitialize(`recovery-ledger mcp-gateway cannot start: ${error.message}`);
  return error;
}

/**
 * Serves the gateway on stdio until the host closes it: the host starts this command as its MCP
 * server, and the command starts (or reaches) the upstream servers named in the configuration.
 */
export async function mcpGatewayCommand(global: GlobalOptions, options: McpGatewayOptions): Promise<void> {
  let config;
  try {
    config = loadGatewayConfig(options.config, process.env, { ledgerUrl: global.url });
  } catch (error) {
    if (error instanceof GatewayConfigError) throw await cannotStart(usageError(error.message));
    throw error;
  }
  // --url / --key (or LEDGER_URL / LEDGER_API_KEY through them) point a configuration at another ledger.
  if (global.key) config.ledger.api_key = global.key;

  const gateway = new McpGateway(config, log);
  try {
    await gateway.start();
  } catch (error) {
    await gateway.close();
    throw await cannotStart(new CliError(`the upstream servers could not be started: ${error instanceof Error ? error.message : String(error)}`, EXIT.unavailable));
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
