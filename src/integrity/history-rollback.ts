import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { readModelFile } from '../store/read-model.port';
import type { EventStore } from '../store/event-store.port';
import {
  checkAgainstWitness,
  currentHead,
  readHeadWitness,
  WitnessError,
  type HeadWitness,
  type LogHead,
  type WitnessFindingKind,
} from './head-witness';
import { operationStream } from '../store/stream-names';
import { webhookFile } from '../webhooks/webhook-store.port';

/**
 * Evidence that the log was rolled back to an older copy (docs/security.md, "A log rolled back"):
 * something that only a longer log could have written. Inside the data directory that is a read
 * model, or the webhook consumer, that has seen positions or operations the log no longer holds
 * (the log file alone restored); outside it, the head witness (the whole directory restored, read
 * models and all, so everything inside agrees with the old log).
 *
 * Leases live in the log's own file (SQLite) or store (EventStoreDB), so they go back with it and
 * witness nothing.
 */
export type RollbackFindingKind =
  WitnessFindingKind | 'read_model_ahead' | 'read_model_operation_ahead' | 'webhook_checkpoint_ahead';

export interface RollbackFinding {
  kind: RollbackFindingKind;
  detail: string;
}

export interface RollbackReport {
  head: LogHead;
  witness?: HeadWitness;
  findings: RollbackFinding[];
}

export interface RollbackCheckOptions {
  dataDir: string;
  witnessFile?: string;
  anchorKey?: string;
}

/** Opens a file of the data directory read-only, or answers undefined where there is none. */
function openReadOnly(file: string): Database.Database | undefined {
  if (!existsSync(file)) return undefined;
  return new Database(file, { readonly: true, fileMustExist: true, timeout: 5000 });
}

/** How many operations are named in a finding; the rest are counted. */
const NAMED = 3;
/** How many of the read model's newest operations are looked up in the log at start. */
const OPERATIONS_LOOKED_AT = 10_000;

async function readModelEvidence(store: EventStore, head: LogHead, dataDir: string): Promise<RollbackFinding[]> {
  const db = openReadOnly(readModelFile(dataDir));
  if (!db) return [];
  try {
    const findings: RollbackFinding[] = [];
    const hasTable = (name: string) =>
      db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined;
    if (hasTable('projection_checkpoints')) {
      const ahead = db
        .prepare('SELECT projection, position FROM projection_checkpoints WHERE position > ? ORDER BY projection')
        .all(head.position) as Array<{ projection: string; position: number }>;
      if (ahead.length > 0) {
        findings.push({
          kind: 'read_model_ahead',
          detail: `the read models ${ahead.map((row) => `${row.projection} (position ${row.position})`).join(', ')} have applied events up to a position the log does not reach (its head is ${head.position}): the log was rolled back`,
        });
      }
    }
    if (store.keepsAnchors && hasTable('rm_step_state')) {
      // The newest operations (by row order) are the ones a rollback loses; a bounded look keeps
      // the start quick on a read model of millions of operations.
      const rows = db
        .prepare('SELECT tenant, operation_ref, revision FROM rm_step_state ORDER BY rowid DESC LIMIT ?')
        .all(OPERATIONS_LOOKED_AT) as Array<{
        tenant: string;
        operation_ref: string;
        revision: number;
      }>;
      const missing: string[] = [];
      let count = 0;
      for (const row of rows) {
        const revision = (await store.anchoredHead(operationStream(row.tenant, row.operation_ref)))?.revision;
        if (revision !== undefined && revision >= row.revision) continue;
        count += 1;
        if (missing.length < NAMED) {
          missing.push(
            `${row.operation_ref} (tenant ${row.tenant}) at revision ${row.revision}, ${revision === undefined ? 'absent from the log' : `the log only to ${revision}`}`,
          );
        }
      }
      if (count > 0) {
        findings.push({
          kind: 'read_model_operation_ahead',
          detail: `the step-state read model knows ${count} operation${count === 1 ? '' : 's'} (of its newest ${rows.length}) further than the log: ${missing.join('; ')}${count > missing.length ? '; …' : ''}: the log was rolled back`,
        });
      }
    }
    return findings;
  } finally {
    db.close();
  }
}

function webhookEvidence(head: LogHead, dataDir: string): RollbackFinding[] {
  const db = openReadOnly(webhookFile(dataDir));
  if (!db) return [];
  try {
    if (!db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'webhook_checkpoint'").get())
      return [];
    const row = db.prepare('SELECT position FROM webhook_checkpoint WHERE id = 1').get() as
      { position: number } | undefined;
    if (!row || row.position <= head.position) return [];
    return [
      {
        kind: 'webhook_checkpoint_ahead',
        detail: `the webhook consumer has read the log up to position ${row.position}, beyond its head ${head.position}: the log was rolled back`,
      },
    ];
  } finally {
    db.close();
  }
}

/** Every piece of evidence of a rollback, from the data directory and the witness. Reads only. */
export async function findRollback(store: EventStore, options: RollbackCheckOptions): Promise<RollbackReport> {
  let witness: HeadWitness | undefined;
  const findings: RollbackFinding[] = [];
  let head: LogHead;
  if (options.witnessFile) {
    try {
      witness = readHeadWitness(options.witnessFile);
    } catch (error) {
      if (!(error instanceof WitnessError)) throw error;
      // A witness that cannot be read proves nothing either way; it is not silently started afresh.
      findings.push({ kind: 'witness_unreadable', detail: error.message });
    }
  }
  if (witness) {
    const checked = await checkAgainstWitness(store, witness, options.anchorKey);
    head = checked.head;
    findings.push(...checked.findings);
  } else {
    head = await currentHead(store);
  }
  findings.push(...(await readModelEvidence(store, head, options.dataDir)));
  findings.push(...webhookEvidence(head, options.dataDir));
  return { head, witness, findings };
}

/**
 * After an operator accepted a rollback: the webhook consumer reads on from the log's head (what
 * stood after it is gone from the log; the read models are rebuilt by their own lifecycle).
 */
export function lowerWebhookCheckpoint(dataDir: string, position: number): void {
  const file = webhookFile(dataDir);
  if (!existsSync(file)) return;
  const db = new Database(file, { timeout: 5000 });
  try {
    if (db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'webhook_checkpoint'").get()) {
      db.prepare('UPDATE webhook_checkpoint SET position = ? WHERE id = 1 AND position > ?').run(position, position);
    }
  } finally {
    db.close();
  }
}
