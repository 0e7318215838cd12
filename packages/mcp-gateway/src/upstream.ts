/**
 * One upstream MCP server, as the gateway's client sees it: started as a process (stdio) or reached
 * at a URL (streamable HTTP), reconnected on the next use after it went away. A call is reported
 * as "not sent" only when the gateway knows the request never left; everything else that goes
 * wrong after sending is for the caller to treat as an unknown outcome.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CallToolResultSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import type { ServerConfig } from './gateway-config';
import { traceMeta } from './telemetry';

/** The request never left the gateway: nothing can have run upstream. */
export class UpstreamNotSentError extends Error {
  constructor(
    readonly server: string,
    cause: unknown,
  ) {
    super(`upstream ${server} could not be reached`, { cause });
    this.name = 'UpstreamNotSentError';
  }
}

/**
 * The call window the ledger granted ended before the request could leave (the server was still
 * being started or reconnected): nothing was sent, and nothing may be now.
 */
export class CallWindowPassedError extends Error {
  constructor(readonly server: string) {
    super(`the call window ended before the request to ${server} could leave`);
    this.name = 'CallWindowPassedError';
  }
}

const CLIENT_INFO = { name: 'recovery-ledger-mcp-gateway', version: '1.0.0' };

export class Upstream {
  private client: Client | undefined;
  private connecting: Promise<Client> | undefined;

  constructor(
    readonly name: string,
    private readonly config: ServerConfig,
    private readonly log: (line: Record<string, unknown>) => void,
  ) {}

  private transport(): Transport {
    if ('command' in this.config) {
      return new StdioClientTransport({
        command: this.config.command,
        args: this.config.args,
        env: { ...getDefaultEnvironment(), ...(this.config.env ?? {}) },
        ...(this.config.cwd ? { cwd: this.config.cwd } : {}),
        // The upstream's stderr is its own log; it never reaches the host's protocol stream.
        stderr: 'inherit',
      });
    }
    return new StreamableHTTPClientTransport(new URL(this.config.url), {
      requestInit: { headers: this.config.headers ?? {} },
    });
  }

  /** The connected client, starting or reconnecting the server when it is not. */
  async connect(): Promise<Client> {
    if (this.client) return this.client;
    if (this.connecting) return this.connecting;
    this.connecting = (async () => {
      const client = new Client(CLIENT_INFO);
      client.onclose = () => {
        if (this.client === client) {
          this.client = undefined;
          this.log({ event: 'upstream_closed', server: this.name });
        }
      };
      client.onerror = () => {
        /* transport errors surface as failed requests; onclose handles the loss */
      };
      await client.connect(this.transport());
      this.client = client;
      return client;
    })();
    try {
      return await this.connecting;
    } finally {
      this.connecting = undefined;
    }
  }

  async listTools(): Promise<Tool[]> {
    const client = await this.connect();
    const tools: Tool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 1000; page++) {
      const answer = await client.listTools(cursor ? { cursor } : {});
      tools.push(...answer.tools);
      if (!answer.nextCursor) break;
      cursor = answer.nextCursor;
    }
    return tools;
  }

  /**
   * One tools/call, given up after `timeoutMs` or when `signal` aborts (the end of the call window
   * the ledger granted), whichever comes first. UpstreamNotSentError when the server could not be
   * reached before sending, CallWindowPassedError when the window ended before it could be; any
   * other throw happened after the request may have left.
   */
  async callTool(
    name: string,
    args: Record<string, unknown>,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<CallToolResult> {
    let client: Client;
    try {
      client = await this.connect();
    } catch (error) {
      throw new UpstreamNotSentError(this.name, error);
    }
    // Starting or reconnecting the server took time out of the window: it may be over already.
    if (signal?.aborted) throw new CallWindowPassedError(this.name);
    // The plain request, not client.callTool: its output-schema check would turn an answer that
    // came back (the tool ran) into a thrown protocol error, indistinguishable from a refusal.
    // The call's trace goes on to the upstream server in `params._meta` (MCP's place for it).
    const meta = traceMeta();
    const params = Object.keys(meta).length > 0 ? { name, arguments: args, _meta: meta } : { name, arguments: args };
    return (await client.request({ method: 'tools/call', params }, CallToolResultSchema, {
      timeout: timeoutMs,
      ...(signal ? { signal } : {}),
    })) as CallToolResult;
  }

  async close(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.close().catch(() => undefined);
  }
}
