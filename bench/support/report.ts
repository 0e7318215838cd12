/** The rows the benchmark reports, the table it prints and the JSON it writes. */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, freemem, loadavg, totalmem } from 'node:os';
import { dirname } from 'node:path';

export interface Measure {
  label: string;
  value: number;
  unit: string;
}

export interface Target {
  /** The target, in words (`≥ 60 % of the baseline and p99 < 20 ms`). */
  text: string;
  met: boolean;
}

export interface FigureRow {
  /** Figure number (docs/performance.md), with a letter for a second row of one figure (`1`, `6b`). */
  id: string;
  name: string;
  figure: Measure;
  baseline?: Measure;
  /** figure / baseline, when both measure the same thing. */
  ratio?: number;
  target?: Target;
  /** Everything else measured for this row (latencies, counts, errors). */
  details: Record<string, unknown>;
}

export interface Machine {
  date: string;
  nproc: number;
  cpu: string;
  memory: string;
  node: string;
  loadAverageAtStart: number[];
  loadAverageAtEnd?: number[];
}

export function machine(): Machine {
  let nproc = cpus().length;
  let memory = `${(totalmem() / 2 ** 30).toFixed(1)} GiB total, ${(freemem() / 2 ** 30).toFixed(1)} GiB free`;
  try {
    nproc = Number(execFileSync('nproc', { encoding: 'utf8' }).trim());
    const mem = execFileSync('free', ['-h'], { encoding: 'utf8' })
      .split('\n')
      .find((line) => line.startsWith('Mem:'));
    if (mem) {
      const [, total, used, free] = mem.split(/\s+/);
      memory = `${total} total, ${used} used, ${free} free (free -h)`;
    }
  } catch {
    /* not Linux: os figures above */
  }
  return {
    date: new Date().toISOString(),
    nproc,
    cpu: cpus()[0]?.model ?? 'unknown',
    memory,
    node: process.version,
    loadAverageAtStart: loadavg().map((value) => Number(value.toFixed(2))),
  };
}

export function percentile(values: readonly number[], q: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

const format = (value: number): string => {
  if (!Number.isFinite(value)) return String(value);
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString('en-US');
  if (Math.abs(value) >= 10) return value.toFixed(1);
  return value.toFixed(2);
};

export const show = (measure: Measure | undefined): string =>
  measure ? `${format(measure.value)} ${measure.unit}` : '—';

/** A Markdown table (it reads in a terminal and pastes into docs/performance.md as it is). */
export function table(rows: readonly FigureRow[]): string {
  const lines = [
    '| # | figure | measured | baseline (same run, right before) | ratio | target | met |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const row of rows) {
    const baseline = row.baseline ? `${show(row.baseline)} (${row.baseline.label})` : '—';
    const ratio =
      row.ratio === undefined ? '—' : row.ratio >= 1 ? `${row.ratio.toFixed(2)}×` : `${(row.ratio * 100).toFixed(1)} %`;
    const met = row.target ? (row.target.met ? 'yes' : '**no**') : '—';
    lines.push(
      `| ${row.id} | ${row.name} | ${show(row.figure)} (${row.figure.label}) | ${baseline} | ${ratio} | ${row.target?.text ?? '—'} | ${met} |`,
    );
  }
  return lines.join('\n');
}

export function writeJson(file: string, value: unknown): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
}

export interface TargetLine {
  id: string;
  name: string;
  target: string;
  /** The ratio when the row has one, else the figure itself. */
  measured: string;
  met: boolean;
}

/** Every row with a target, one line each, so a run ends with what was met and what was not. */
export function targetLines(rows: readonly FigureRow[]): TargetLine[] {
  return rows.flatMap((row) =>
    row.target
      ? [
          {
            id: row.id,
            name: row.name,
            target: row.target.text,
            measured:
              row.ratio === undefined
                ? show(row.figure)
                : row.ratio >= 1
                  ? `${row.ratio.toFixed(2)}×`
                  : `${(row.ratio * 100).toFixed(1)} %`,
            met: row.target.met,
          },
        ]
      : [],
  );
}
