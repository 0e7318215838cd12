/** What the example programs share: `--name value` flags and one JSON object per output line. */
import { readFileSync } from 'node:fs';

export function flag(name: string, fallback?: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? process.argv[index + 1] : fallback;
}

export function integerFlag(name: string, fallback: number): number {
  const raw = flag(name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 0)
    throw new Error(`--${name} must be a non-negative integer, got "${raw}"`);
  return value;
}

export const log = (record: Record<string, unknown>) =>
  process.stdout.write(`${JSON.stringify({ at: new Date().toISOString(), ...record })}\n`);

/**
 * `--help` or `-h`: prints the example's usage, which is the header comment of its own file, and
 * exits before it reaches a ledger or a provider. Call it first, with `__filename`.
 */
export function exitOnHelp(file: string): void {
  if (!process.argv.includes('--help') && !process.argv.includes('-h')) return;
  const header = /\/\*\*([\s\S]*?)\*\//.exec(readFileSync(file, 'utf8'));
  process.stdout.write(`${(header?.[1] ?? '').replace(/^[ \t]*\* ?/gm, '').trim()}\n`);
  process.exit(0);
}
