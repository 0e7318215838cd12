/**
 * Calls made with or without a key, answered with their raw text as well as the parsed body (a
 * test of what an answer echoes reads the text), a plan to submit, and the raw rows of the log:
 * what the keys-and-tenants tests, in process and against the built service, both read.
 */
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';

export async function call(baseUrl: string, method: string, path: string, key: string | undefined, body?: unknown) {
  const headers: Record<string, string> = {};
  if (key) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: any;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: response.status, text, body: parsed, headers: response.headers };
}

export const plan = (runId: string, tool: string) => ({
  event_id: randomUUID(),
  type: 'StepPlanned',
  data: { run_id: runId, tool, side_effect: 'write', input_hash: 'sha256:in' },
});

/** Every row of the log's events table, read with a connection of the test's own. */
export function rawRows(dataDir: string): Array<Record<string, string | number>> {
  const db = new Database(join(dataDir, 'events.sqlite'), { readonly: true, fileMustExist: true });
  try {
    return db.prepare('SELECT * FROM events ORDER BY position').all() as Array<Record<string, string | number>>;
  } finally {
    db.close();
  }
}
