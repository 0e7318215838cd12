import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { canonicalJson } from '@recovery-ledger/core';
import type { Checkpoint } from '../store/read-model.port';

/**
 * The read model's seal (docs/reliability.md, "A corrupted read model"): written when the service
 * has stopped its projection engine and closed the read model, it records each projection's
 * checkpoint (the log position it has applied, its version) and the identity of the files as they
 * were closed: size, modification and change times to the nanosecond, inode. A read model that
 * nothing has opened for writing since matches it exactly, and is served at the next start without
 * being rebuilt to be compared; anything else (an edit, a copy, a restore, a crash, a seal edited
 * or missing) does not, and the read model is then compared with the log as before. The change
 * time cannot be set by a file's owner, only moved forward by touching the file. Signed with
 * HMAC-SHA256 under LEDGER_ANCHOR_KEY where one is set (a plain digest otherwise). A seal is used
 * once: it is removed as the read model is opened for writing.
 */
export interface ReadModelSeal {
  format: 'recovery-ledger-read-model-seal';
  version: 1;
  sealed_at: string;
  projections: Array<{ name: string; version: number; position: number }>;
  files: Record<string, FileIdentity | null>;
  digest: string;
}

interface FileIdentity {
  size: number;
  mtime_ns: string;
  ctime_ns: string;
  ino: string;
}

export const sealFile = (readModelFile: string) => `${readModelFile}.seal.json`;

/** The read model's own file and its write-ahead log: both hold its rows. */
const sealedFiles = (readModelFile: string) => [readModelFile, `${readModelFile}-wal`];

function identity(file: string): FileIdentity | null {
  const stat = statSync(file, { bigint: true, throwIfNoEntry: false });
  if (!stat) return null;
  return {
    size: Number(stat.size),
    mtime_ns: String(stat.mtimeNs),
    ctime_ns: String(stat.ctimeNs),
    ino: String(stat.ino),
  };
}

function digestOf(seal: Omit<ReadModelSeal, 'digest'>, key: string | undefined): string {
  const text = canonicalJson({
    format: seal.format,
    version: seal.version,
    projections: seal.projections,
    files: seal.files,
  });
  return key ? createHmac('sha256', key).update(text).digest('hex') : createHash('sha256').update(text).digest('hex');
}

/** Seals the closed read model (call after its last connection closed); flushed before it is renamed in place. */
export function writeReadModelSeal(
  readModelFile: string,
  checkpoints: readonly Checkpoint[],
  key: string | undefined,
  sealedAt: string,
): void {
  const files = Object.fromEntries(
    sealedFiles(readModelFile).map((file, index) => [index === 0 ? 'read_model' : 'wal', identity(file)]),
  );
  const unsigned = {
    format: 'recovery-ledger-read-model-seal' as const,
    version: 1 as const,
    sealed_at: sealedAt,
    projections: checkpoints
      .map(({ projection, version, position }) => ({ name: projection, version, position }))
      .sort((a, b) => a.name.localeCompare(b.name)),
    files,
  };
  const seal: ReadModelSeal = { ...unsigned, digest: digestOf(unsigned, key) };
  const target = sealFile(readModelFile);
  const temporary = `${target}.${process.pid}.tmp`;
  const fd = openSync(temporary, 'w', 0o600);
  try {
    writeSync(fd, `${JSON.stringify(seal, null, 2)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, target);
}

export type SealVerdict =
  | { holds: true; seal: ReadModelSeal }
  | { holds: false; reason: 'no_seal' | 'unreadable' | 'digest' | 'files_changed' };

/**
 * Whether the read model is the one sealed at the last clean stop: read before anything opens it,
 * and the seal removed then, so it vouches for one start only.
 */
export function takeReadModelSeal(readModelFile: string, key: string | undefined): SealVerdict {
  const file = sealFile(readModelFile);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return { holds: false, reason: 'no_seal' };
  }
  rmSync(file, { force: true });
  let seal: ReadModelSeal;
  try {
    seal = JSON.parse(text) as ReadModelSeal;
    if (seal.format !== 'recovery-ledger-read-model-seal' || seal.version !== 1 || !Array.isArray(seal.projections))
      return { holds: false, reason: 'unreadable' };
  } catch {
    return { holds: false, reason: 'unreadable' };
  }
  const { digest, ...unsigned } = seal;
  const expected = digestOf(unsigned, key);
  if (
    typeof digest !== 'string' ||
    digest.length !== expected.length ||
    !timingSafeEqual(Buffer.from(digest), Buffer.from(expected))
  )
    return { holds: false, reason: 'digest' };
  const now = Object.fromEntries(
    sealedFiles(readModelFile).map((path, index) => [index === 0 ? 'read_model' : 'wal', identity(path)]),
  );
  if (canonicalJson(now) !== canonicalJson(seal.files)) return { holds: false, reason: 'files_changed' };
  return { holds: true, seal };
}

/**
 * A sealed read model is served as it is only where every projection it sealed is one this build
 * runs, at the same version, and at a position the log still reaches; otherwise it is compared.
 */
export function sealCovers(
  seal: ReadModelSeal,
  projections: ReadonlyArray<{ name: string; version: number }>,
  logHead: number,
): boolean {
  const sealed = new Map(seal.projections.map((projection) => [projection.name, projection]));
  return projections.every((projection) => {
    const entry = sealed.get(projection.name);
    return entry !== undefined && entry.version === projection.version && entry.position <= logHead;
  });
}
