import { existsSync } from 'node:fs';
import { ConfigError, loadConfig, type LedgerConfig } from '../config/ledger-config';
import { StoreUnavailableError, type EventStore } from '../store/event-store.port';
import { openEventStore } from '../adapters/store.factory';
import { CliError, EXIT, usageError } from './cli-errors';

/** The options every command shares (set on the program, accepted before or after the command). */
export interface GlobalOptions {
  dataDir?: string;
  url?: string;
  key?: string;
  tenant: string;
}

export interface LocalStore {
  store: EventStore;
  config: LedgerConfig;
  /** Where the events live, for messages: the SQLite file or the EventStoreDB connection. */
  location: string;
}

/**
 * Opens the store the service would open for this data directory (LEDGER_STORE and friends are
 * read from the environment exactly as the service reads them). Commands that only read refuse a
 * data directory without a store rather than creating an empty one there by accident.
 */
export async function openLocalStore(options: GlobalOptions, { create = false } = {}): Promise<LocalStore> {
  let config: LedgerConfig;
  try {
    config = loadConfig({ ...process.env, ...(options.dataDir ? { LEDGER_DATA_DIR: options.dataDir } : {}) });
  } catch (error) {
    if (error instanceof ConfigError) throw usageError(error.message);
    throw error;
  }
  const location =
    config.store === 'sqlite'
      ? config.eventsFile
      : config.store === 'postgres'
        ? 'PostgreSQL (DATABASE_URL)'
        : 'EventStoreDB (EVENTSTORE_CONNECTION_STRING)';
  if (config.store === 'sqlite' && !create && !existsSync(location)) {
    throw new CliError(
      `no event store at ${location} (point --data-dir or LEDGER_DATA_DIR at the service's data directory)`,
    );
  }
  try {
    return { store: await openEventStore(config), config, location };
  } catch (error) {
    if (error instanceof StoreUnavailableError)
      throw new CliError(`cannot open the event store at ${location}: ${error.reason}`, EXIT.unavailable);
    throw error;
  }
}

/** Runs `work` on the local store and always closes it, so a failed command never leaves a lock. */
export async function withLocalStore<T>(
  options: GlobalOptions,
  work: (local: LocalStore) => Promise<T>,
  open = {},
): Promise<T> {
  const local = await openLocalStore(options, open);
  try {
    return await work(local);
  } catch (error) {
    if (error instanceof StoreUnavailableError)
      throw new CliError(`the event store is unavailable: ${error.reason}`, EXIT.unavailable);
    throw error;
  } finally {
    await local.store.close();
  }
}

/** Commands the HTTP API has no route for (tail, import) work on a data directory only. */
export function requireLocal(options: GlobalOptions, command: string): void {
  if (options.url) {
    throw usageError(`${command} works on a data directory only (--data-dir); the HTTP API has no route for it`);
  }
}

interface Problem {
  code?: string;
  detail?: string;
  title?: string;
}

/** A problem+json answer as the CLI's error: `409 OUTCOME_UNVERIFIED: <detail>`, a 503 exit 3, any other exit 1. */
export function problemError(status: number, problem: Problem, statusText = ''): CliError {
  const code = problem.code ?? `HTTP_${status}`;
  const detail = problem.detail ?? problem.title ?? statusText;
  return new CliError(`${status} ${code}: ${detail}`, status === 503 ? EXIT.unavailable : EXIT.failure, code);
}

/**
 * The public HTTP API, read with the caller's key (`Authorization: Bearer`), exactly as any other
 * client reads it: the CLI gets no access a key would not give.
 */
export class RemoteLedger {
  private readonly base: URL;

  constructor(
    url: string,
    private readonly key: string | undefined,
  ) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw usageError(`--url must be an http(s) URL, got "${url}"`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
      throw usageError(`--url must be an http(s) URL, got "${url}"`);
    this.base = parsed;
  }

  private url(path: string, query: Record<string, string | number | undefined>): URL {
    const url = new URL(path.replace(/^\//, ''), this.base.href.endsWith('/') ? this.base.href : `${this.base.href}/`);
    for (const [name, value] of Object.entries(query))
      if (value !== undefined) url.searchParams.set(name, String(value));
    return url;
  }

  /** One request; a network failure is exit 3, the answer is the caller's to read. */
  async send(
    method: 'GET' | 'POST',
    path: string,
    query: Record<string, string | number | undefined> = {},
    body?: unknown,
  ): Promise<Response> {
    try {
      return await fetch(this.url(path, query), {
        method,
        headers: {
          accept: 'application/json, application/x-ndjson',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(this.key ? { authorization: `Bearer ${this.key}` } : {}),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      throw new CliError(
        `cannot reach ${this.base.origin}: ${cause?.code ?? cause?.message ?? (error as Error).message}`,
        EXIT.unavailable,
      );
    }
  }

  /** A non-2xx answer as the CLI's error: the problem's stable code and detail. */
  async failure(response: Response): Promise<CliError> {
    let problem: Problem = {};
    try {
      problem = JSON.parse(await response.text()) as Problem;
    } catch {
      /* not a problem document: the status says enough */
    }
    return problemError(response.status, problem, response.statusText);
  }

  async get<T>(path: string, query: Record<string, string | number | undefined> = {}): Promise<T> {
    const response = await this.send('GET', path, query);
    if (!response.ok) throw await this.failure(response);
    return (await response.json()) as T;
  }

  async post<T>(path: string, query: Record<string, string | number | undefined> = {}): Promise<T> {
    const response = await this.send('POST', path, query);
    if (!response.ok) throw await this.failure(response);
    return (await response.json()) as T;
  }

  /** A POST with a JSON body (a submit of facts); a refusal is the problem's code, exit 1. */
  async postJson<T>(path: string, body: unknown): Promise<T> {
    const response = await this.send('POST', path, {}, body);
    if (!response.ok) throw await this.failure(response);
    return (await response.json()) as T;
  }

  /** Status and parsed body whatever the status (readiness answers 503 with a report). */
  async probe<T>(path: string): Promise<{ status: number; body: T | undefined }> {
    const response = await this.send('GET', path);
    const text = await response.text();
    try {
      return { status: response.status, body: JSON.parse(text) as T };
    } catch {
      return { status: response.status, body: undefined };
    }
  }

  get origin(): string {
    return this.base.origin;
  }
}

export function remoteLedger(options: GlobalOptions): RemoteLedger | undefined {
  return options.url ? new RemoteLedger(options.url, options.key) : undefined;
}

export const encodeRef = (ref: string) => encodeURIComponent(ref);
