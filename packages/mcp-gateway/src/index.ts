/**
 * The MCP gateway: upstream MCP tools pass through to the host, and the write tools the
 * configuration names run through the ledger (docs/mcp-gateway.md). It reaches the ledger through
 * the client package only, like any other runtime.
 */
export { McpGateway, OPERATION_REF_DESCRIPTION } from './mcp-gateway';
export type { GatewayLog } from './mcp-gateway';
export {
  DEFAULT_WRITE_TIMEOUT_MS,
  GATEWAY_TOOLS,
  GatewayConfigError,
  isLoopbackUrl,
  loadGatewayConfig,
  parseGatewayConfig,
} from './gateway-config';
export type {
  ConfigOverrides,
  GatewayConfig,
  LookupConfig,
  ServerConfig,
  ToolTextConfig,
  WriteToolConfig,
} from './gateway-config';
export { refuseInitialize } from './startup-failure';
export type { RefuseOptions } from './startup-failure';
export { GatewayStartError, serveGatewayOnStdio } from './serve-stdio';
export type { ServeOptions } from './serve-stdio';
