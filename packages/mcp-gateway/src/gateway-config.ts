/**
 * The MCP gateway's configuration file: which upstream servers to start or reach, which of their
 * tools write, how each write is verified by operation_ref, the policy the ledger applies, and
 * where the ledger is. Checked whole before anything starts; every mistake is reported with the
 * path of the field that holds it.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';

/** `${env:NAME}` in a string is the variable's value, so secrets stay out of the file. */
const ENV_REFERENCE = /\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g;
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
const CODE = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$/;
const ARGUMENT = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
/** A write's upstream call timeout by default: well inside the default 30 s consistency window. */
export const DEFAULT_WRITE_TIMEOUT_MS = 10_000;
/** The tools the gateway adds itself; an upstream tool may not take these names. */
export const GATEWAY_TOOLS = ['verify_operation', 'operation_status'] as const;

const httpUrl = z.string().refine((value) => {
  try {
    const { protocol } = new URL(value);
    return protocol === 'http:' || protocol === 'https:';
  } catch {
    return false;
  }
}, 'must be an http(s) URL');

const headers = z.record(z.string().min(1), z.string()).optional();

/**
 * Whether the server's own words (tool titles, descriptions, schema descriptions) may reach the
 * host's model. They are text an upstream chose, so an instruction could hide in them: by default
 * they are dropped, and the configuration's own `title` / `description` are shown instead.
 */
const trustDescriptions = z.boolean().default(false);

const stdioServer = z.strictObject({
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  env: z.record(z.string(), z.string()).optional(),
  cwd: z.string().optional(),
  trust_descriptions: trustDescriptions,
});

const httpServer = z.strictObject({
  url: httpUrl,
  headers,
  trust_descriptions: trustDescriptions,
});

/** What the host's model reads about a tool, written by whoever configures the gateway. */
const toolText = {
  title: z.string().min(1).max(200).optional(),
  description: z.string().min(1).max(4000).optional(),
};

const toolLookup = z.strictObject({
  /** An upstream tool that answers found / not found for an operation_ref. */
  tool: z.string().regex(TOOL_NAME, 'must be a tool name'),
  /** The server that has it (default: the write tool's). */
  server: z.string().optional(),
  /** The argument the operation_ref goes in (default operation_ref). */
  argument: z.string().regex(ARGUMENT, 'must be an argument name').default('operation_ref'),
  found_field: z.string().min(1).default('found'),
  evidence_field: z.string().min(1).default('evidence_ref'),
  timeout_ms: z.number().int().positive().max(600_000).optional(),
});

const httpLookup = z.strictObject({
  /** GET this URL, `{operation_ref}` replaced by the percent-encoded reference. */
  url: httpUrl.refine((value) => value.includes('%7Boperation_ref%7D') || value.includes('{operation_ref}'), {
    message: 'must contain {operation_ref}',
  }),
  headers,
  found_field: z.string().min(1).default('found'),
  evidence_field: z.string().min(1).default('evidence_ref'),
  timeout_ms: z.number().int().positive().max(600_000).optional(),
});

const policy = z.strictObject({
  max_attempts: z.number().int().min(1).max(100).default(3),
  consistency_window_ms: z.number().int().min(0).max(86_400_000).default(30_000),
  /** No call reaches the upstream until a person records an approval in the ledger. */
  approval_required: z.boolean().default(false),
});

const writeTool = z.strictObject({
  /** Pin the tool to one server when several could have it (default: whichever lists it). */
  server: z.string().optional(),
  /** The upstream's idempotency-key argument: it receives the operation_ref on every attempt. */
  idempotency_argument: z.string().regex(ARGUMENT, 'must be an argument name').optional(),
  /** The upstream error codes passed on to the model as they are; any other becomes UPSTREAM_ERROR. */
  vouched_codes: z.array(z.string().regex(CODE, 'must be an UPPER_SNAKE_CASE code').max(64)).default([]),
  lookup: z.union([toolLookup, httpLookup], { error: 'must be { "tool": ... } or { "url": ... }' }),
  policy: policy.default({ max_attempts: 3, consistency_window_ms: 30_000, approval_required: false }),
  /**
   * How long one upstream call may take before its outcome is unknown (default 10 s). It is the
   * call window the gateway declares on each dispatch, so it must be shorter than the consistency
   * window (checked below).
   */
  timeout_ms: z.number().int().positive().max(3_600_000).default(DEFAULT_WRITE_TIMEOUT_MS),
  ...toolText,
});

const configSchema = z.strictObject({
  ledger: z
    .strictObject({
      url: httpUrl.default('http://127.0.0.1:3000'),
      /** The key itself; prefer api_key_env, which keeps it out of the file. */
      api_key: z.string().min(1).optional(),
      /** The environment variable holding the key (default LEDGER_API_KEY, when set). */
      api_key_env: z
        .string()
        .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
        .optional(),
      timeout_ms: z.number().int().positive().max(600_000).default(10_000),
    })
    .default({ url: 'http://127.0.0.1:3000', timeout_ms: 10_000 }),
  /** The run the steps belong to when an operation_ref has no `run/` prefix. */
  run_id: z.string().min(1).max(200).default('mcp-gateway'),
  servers: z
    .record(
      z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'server names are letters, digits, _ and -'),
      z.union([stdioServer, httpServer], { error: 'must be { "command": ... } or { "url": ... }' }),
    )
    .refine((servers) => Object.keys(servers).length > 0, 'needs at least one server'),
  write_tools: z.record(z.string().regex(TOOL_NAME, 'must be a tool name'), writeTool),
  /** The title and description the host's model reads for a read tool (optional). */
  read_tools: z.record(z.string().regex(TOOL_NAME, 'must be a tool name'), z.strictObject(toolText)).default({}),
  recovery: z
    .strictObject({
      /**
       * At start, verify only what has been in flight at least this long. 0 suits one gateway per
       * tenant; with several, use more than the longest timeout_ms so a live one's calls are left alone.
       */
      older_than_ms: z.number().int().min(0).default(0),
    })
    .default({ older_than_ms: 0 }),
  /** Upstream error codes of read tools passed on as they are; any other becomes UPSTREAM_ERROR. */
  read_vouched_codes: z.array(z.string().regex(CODE, 'must be an UPPER_SNAKE_CASE code').max(64)).default([]),
  /** How long a read tool's call may take (default 30 s). */
  read_timeout_ms: z.number().int().positive().max(3_600_000).default(30_000),
});

export type GatewayConfig = z.infer<typeof configSchema>;
export type WriteToolConfig = GatewayConfig['write_tools'][string];
export type LookupConfig = WriteToolConfig['lookup'];
export type ServerConfig = GatewayConfig['servers'][string];
export type ToolTextConfig = GatewayConfig['read_tools'][string];

/** A ledger on this machine: the one a local-mode ledger (no keys) is reached at. */
export function isLoopbackUrl(value: string): boolean {
  let host: string;
  try {
    host = new URL(value).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return false;
  }
  return host === 'localhost' || host === '::1' || /^127(?:\.\d{1,3}){3}$/.test(host);
}

export class GatewayConfigError extends Error {
  constructor(
    readonly file: string,
    readonly problems: string[],
  ) {
    super(`invalid gateway configuration ${file}:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`);
    this.name = 'GatewayConfigError';
  }
}

function pathOf(path: readonly PropertyKey[]): string {
  return path.length === 0
    ? '(top level)'
    : path
        .map((part) => (typeof part === 'number' ? `[${part}]` : String(part)))
        .join('.')
        .replace(/\.\[/g, '[');
}

function expandEnv(value: string, env: NodeJS.ProcessEnv, at: string, problems: string[]): string {
  return value.replace(ENV_REFERENCE, (_match, name: string) => {
    const found = env[name];
    if (found === undefined) problems.push(`${at}: environment variable ${name} is not set`);
    return found ?? '';
  });
}

function expandRecord(
  record: Record<string, string> | undefined,
  env: NodeJS.ProcessEnv,
  at: string,
  problems: string[],
) {
  if (!record) return record;
  return Object.fromEntries(
    Object.entries(record).map(([key, value]) => [key, expandEnv(value, env, `${at}.${key}`, problems)]),
  );
}

/** What the command line overrides (--url / LEDGER_URL): checked as if the file said it. */
export interface ConfigOverrides {
  ledgerUrl?: string;
}

/** Checks a parsed configuration; `file` names it in messages. */
export function parseGatewayConfig(
  raw: unknown,
  file: string,
  env: NodeJS.ProcessEnv = process.env,
  overrides: ConfigOverrides = {},
): GatewayConfig {
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    throw new GatewayConfigError(
      file,
      parsed.error.issues.map((issue) => `${pathOf(issue.path)}: ${issue.message}`),
    );
  }
  const config = parsed.data;
  if (overrides.ledgerUrl) config.ledger.url = overrides.ledgerUrl;
  const problems: string[] = [];
  const servers = Object.keys(config.servers);
  for (const [name, server] of Object.entries(config.servers)) {
    if ('command' in server) {
      server.env = expandRecord(server.env, env, `servers.${name}.env`, problems);
      server.args = server.args.map((arg, index) => expandEnv(arg, env, `servers.${name}.args[${index}]`, problems));
    } else {
      server.headers = expandRecord(server.headers, env, `servers.${name}.headers`, problems);
    }
  }
  for (const [name, tool] of Object.entries(config.write_tools)) {
    const at = `write_tools.${name}`;
    if ((GATEWAY_TOOLS as readonly string[]).includes(name))
      problems.push(`${at}: ${name} is a tool of the gateway itself`);
    if (tool.server !== undefined && !servers.includes(tool.server))
      problems.push(`${at}.server: no server named ${tool.server}`);
    // A call still open upstream when a not_found is judged could commit after it: the ledger
    // counts the consistency window from the end of the call window the gateway declares, so that
    // window must end first (docs/contract.md §4).
    if (tool.timeout_ms >= tool.policy.consistency_window_ms) {
      problems.push(
        `${at}.timeout_ms: ${tool.timeout_ms} must be less than ${at}.policy.consistency_window_ms (${tool.policy.consistency_window_ms}): a call still open when the window ends could commit after a lookup found nothing`,
      );
    }
    if ('tool' in tool.lookup) {
      if (tool.lookup.tool === name) problems.push(`${at}.lookup.tool: a write tool cannot verify itself`);
      if (config.write_tools[tool.lookup.tool])
        problems.push(`${at}.lookup.tool: ${tool.lookup.tool} is a write tool; a lookup must only read`);
      if (tool.lookup.server !== undefined && !servers.includes(tool.lookup.server)) {
        problems.push(`${at}.lookup.server: no server named ${tool.lookup.server}`);
      }
    } else {
      tool.lookup.headers = expandRecord(tool.lookup.headers, env, `${at}.lookup.headers`, problems);
    }
  }
  for (const name of Object.keys(config.read_tools)) {
    if (config.write_tools[name])
      problems.push(
        `read_tools.${name}: ${name} is a write tool; give its title and description in write_tools.${name}`,
      );
  }
  if (config.ledger.api_key === undefined) {
    const variable = config.ledger.api_key_env ?? 'LEDGER_API_KEY';
    const key = env[variable];
    if (key) config.ledger.api_key = key;
    // A ledger on this machine may be in local mode, which takes no key; a remote one never is.
    else if (config.ledger.api_key_env && !isLoopbackUrl(config.ledger.url)) {
      problems.push(
        `ledger.api_key_env: environment variable ${variable} is not set (a ledger that is not on this machine needs a runtime key)`,
      );
    }
  }
  if (problems.length > 0) throw new GatewayConfigError(file, problems);
  return config;
}

/** Reads and checks the configuration file. */
export function loadGatewayConfig(
  file: string,
  env: NodeJS.ProcessEnv = process.env,
  overrides: ConfigOverrides = {},
): GatewayConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new GatewayConfigError(file, [`cannot read the file (${(error as NodeJS.ErrnoException).code ?? 'error'})`]);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new GatewayConfigError(file, [`not JSON: ${(error as Error).message}`]);
  }
  return parseGatewayConfig(raw, file, env, overrides);
}
