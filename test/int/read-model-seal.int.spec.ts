/**
 * The read model's seal (docs/reliability.md, "A corrupted read model"): a read model closed by a
 * clean stop and untouched since is recognised at the next start and served without a rebuild to
 * compare it; one written to since, even by SQLite itself, or a seal edited, forged without the key,
 * or used twice, is not, and the read model is compared with the log as before.
 */
import Database from 'better-sqlite3';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import {
  sealCovers,
  sealFile,
  takeReadModelSeal,
  writeReadModelSeal,
} from '../../src/projection-engine/read-model-seal';

const KEY = 'read-model-seal-test-key-0123456789';

describe('the read model sealed at a clean stop', () => {
  let dir: string;
  let file: string;

  /** A read model with every projection registered and a checkpoint moved, closed, then sealed. */
  function closeAndSeal(key?: string): void {
    const readModel = SqliteReadModel.open({ file });
    for (const projection of LEDGER_PROJECTIONS) readModel.register(projection);
    readModel.transaction(() => readModel.setCheckpoint(LEDGER_PROJECTIONS[0].name, 7, null));
    const checkpoints = readModel.checkpoints();
    readModel.close();
    writeReadModelSeal(file, checkpoints, key, '2026-01-01T00:00:00.000Z');
  }

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-seal-'));
    file = join(dir, 'read-models.sqlite');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('holds for the files as they were closed, once', () => {
    closeAndSeal();
    const verdict = takeReadModelSeal(file, undefined);
    expect(verdict.holds).toBe(true);
    if (!verdict.holds) return;
    expect(sealCovers(verdict.seal, LEDGER_PROJECTIONS, 7)).toBe(true);
    // Taken: the seal vouches for one start only.
    expect(existsSync(sealFile(file))).toBe(false);
    expect(takeReadModelSeal(file, undefined)).toEqual({ holds: false, reason: 'no_seal' });
  });

  it('does not hold once the read model was written to', () => {
    closeAndSeal();
    const db = new Database(file);
    db.prepare('UPDATE projection_checkpoints SET position = position + 1').run();
    db.close();
    expect(takeReadModelSeal(file, undefined)).toEqual({ holds: false, reason: 'files_changed' });
  });

  it('does not hold when the seal was edited, or forged without the key', () => {
    closeAndSeal(KEY);
    const sealed = JSON.parse(readFileSync(sealFile(file), 'utf8')) as { projections: Array<{ position: number }> };
    sealed.projections[0].position += 1;
    writeFileSync(sealFile(file), JSON.stringify(sealed));
    expect(takeReadModelSeal(file, KEY)).toEqual({ holds: false, reason: 'digest' });

    closeAndSeal();
    // Sealed with no key (a plain digest): not believed where a key is configured.
    expect(takeReadModelSeal(file, KEY)).toEqual({ holds: false, reason: 'digest' });
  });

  it('does not cover a projection it did not seal, one at another version, or a log that is shorter', () => {
    closeAndSeal();
    const verdict = takeReadModelSeal(file, undefined);
    if (!verdict.holds) throw new Error('the seal should hold');
    expect(sealCovers(verdict.seal, LEDGER_PROJECTIONS, 6)).toBe(false);
    const [first, ...rest] = LEDGER_PROJECTIONS;
    expect(sealCovers(verdict.seal, [{ name: first.name, version: first.version + 1 }, ...rest], 7)).toBe(false);
    expect(sealCovers(verdict.seal, [...LEDGER_PROJECTIONS, { name: 'new_projection', version: 1 }], 7)).toBe(false);
  });
});
