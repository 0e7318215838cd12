import { GatewayStartError, serveGatewayOnStdio } from '@recovery-ledger/mcp-gateway';
import { CliError, EXIT } from '../cli-errors';
import type { GlobalOptions } from '../ledger-source';

export interface McpGatewayOptions {
  config: string;
}

/**
 * `recovery-ledger mcp-gateway`: the gateway package served on stdio, with the CLI's --url and --key
 * (docs/mcp-gateway.md). The package's own `recovery-ledger-mcp-gateway` bin does the same without
 * the server installed.
 */
export async function mcpGatewayCommand(global: GlobalOptions, options: McpGatewayOptions): Promise<void> {
  try {
    await serveGatewayOnStdio({
      config: options.config,
      ...(global.url ? { ledgerUrl: global.url } : {}),
      ...(global.key ? { apiKey: global.key } : {}),
    });
  } catch (error) {
    if (error instanceof GatewayStartError)
      throw new CliError(error.message, error.reason === 'configuration' ? EXIT.usage : EXIT.unavailable);
    throw error;
  }
}
