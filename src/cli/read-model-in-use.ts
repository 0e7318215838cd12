import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';

/**
 * Whether another process has this read-model file open. A running service keeps its data
 * directory's read model open from start to stop (its projection engine follows the log into it),
 * so this is how a command that must not run beside it finds it, with no lock file of its own:
 * a connection in SQLite's exclusive locking mode gets its write lock only while no other
 * connection holds the file (checked: SQLITE_BUSY while the service runs, granted once it stopped).
 * Nothing is written; the connection is closed before the caller opens the file itself.
 */
export function readModelInUse(file: string): boolean {
  if (!existsSync(file)) return false;
  const db = new Database(file, { fileMustExist: true, timeout: 0 });
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE; COMMIT');
    return false;
  } catch (error) {
    if ((error as { code?: string }).code === 'SQLITE_BUSY') return true;
    throw error;
  } finally {
    db.close();
  }
}
