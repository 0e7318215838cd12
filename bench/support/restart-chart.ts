/**
 * The restart figure's chart (docs/performance.md): time to ready, idle resident set and rebuild rate
 * against the log's size, on a logarithmic size axis, as an SVG drawn to PNG by headless Chromium
 * (the browser the console's screenshots use). A baseline run, when given, is drawn beside as dashes.
 */
import { writeFileSync } from 'node:fs';
import { chromium } from 'playwright-core';

export interface RestartPoint {
  events: number;
  timeToReadyS: number;
  idleRssMb: number;
  rebuildEventsPerS: number;
  scanRowsPerS: number;
  /** The service's peak resident set under figure 1's load, when measured. */
  loadPeakRssMb?: number;
  /** Time to ready after a crash (SIGKILL), when measured. */
  crashTimeToReadyS?: number;
}

interface Series {
  label: string;
  color: string;
  dashed?: boolean;
  points: Array<[number, number]>;
}

interface Panel {
  title: string;
  unit: string;
  series: Series[];
  /** A horizontal line: the target. */
  target?: { value: number; label: string };
}

const WIDTH = 1290;
const HEIGHT = 480;
const PANEL_W = 360;
const PANEL_H = 280;

export const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;');
const three = (value: number) => String(Number(value.toPrecision(3)));
const short = (value: number) =>
  value >= 1e6
    ? `${three(value / 1e6)} M`
    : value >= 1e3
      ? `${three(value / 1e3)} k`
      : value >= 10
        ? String(Math.round(value))
        : value.toFixed(1);

/**
 * A panel's title, frame and five horizontal grid lines from 0 to `yMax`, labelled with `label`
 * (a value v is drawn at top + height − v / yMax × height).
 */
export function panelFrame(
  title: string,
  box: { left: number; top: number; width: number; height: number },
  yMax: number,
  label: (value: number) => string,
): string[] {
  const { left, top, width, height } = box;
  const y = (value: number) => top + height - (value / yMax) * height;
  const parts = [
    `<text x="${left}" y="${top - 14}" font-size="15" font-weight="600">${escape(title)}</text>`,
    `<rect x="${left}" y="${top}" width="${width}" height="${height}" fill="none" stroke="#999"/>`,
  ];
  for (let k = 0; k <= 4; k++) {
    const value = (yMax / 4) * k;
    parts.push(
      `<line x1="${left}" x2="${left + width}" y1="${y(value)}" y2="${y(value)}" stroke="#eee"/>`,
      `<text x="${left - 6}" y="${y(value) + 4}" font-size="11" text-anchor="end">${label(value)}</text>`,
    );
  }
  return parts;
}

function panelSvg(panel: Panel, left: number, top: number, sizes: number[]): string {
  const xs = sizes.map((size) => Math.log10(size));
  const [xMin, xMax] = [Math.min(...xs) - 0.15, Math.max(...xs) + 0.15];
  const values = panel.series.flatMap((series) => series.points.map(([, y]) => y));
  if (panel.target) values.push(panel.target.value);
  const yMax = Math.max(...values, 0) * 1.15 || 1;
  const x = (size: number) => left + ((Math.log10(size) - xMin) / (xMax - xMin)) * PANEL_W;
  const y = (value: number) => top + PANEL_H - (value / yMax) * PANEL_H;
  const parts = panelFrame(panel.title, { left, top, width: PANEL_W, height: PANEL_H }, yMax, short);
  for (const size of sizes)
    parts.push(
      `<text x="${x(size)}" y="${top + PANEL_H + 16}" font-size="11" text-anchor="middle">${short(size)}</text>`,
    );
  parts.push(
    `<text x="${left + PANEL_W / 2}" y="${top + PANEL_H + 34}" font-size="12" text-anchor="middle">events in the log</text>`,
    `<text x="${left - 50}" y="${top + PANEL_H / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 ${left - 50} ${top + PANEL_H / 2})">${escape(panel.unit)}</text>`,
  );
  if (panel.target)
    parts.push(
      `<line x1="${left}" x2="${left + PANEL_W}" y1="${y(panel.target.value)}" y2="${y(panel.target.value)}" stroke="#c33" stroke-dasharray="2 3"/>`,
      `<text x="${left + PANEL_W - 4}" y="${y(panel.target.value) - 4}" font-size="11" fill="#c33" text-anchor="end">${escape(panel.target.label)}</text>`,
    );
  panel.series.forEach((series, index) => {
    const path = series.points.map(([size, value]) => `${x(size)},${y(value)}`).join(' ');
    parts.push(
      `<polyline points="${path}" fill="none" stroke="${series.color}" stroke-width="2"${series.dashed ? ' stroke-dasharray="6 4"' : ''}/>`,
      ...series.points.map(
        ([size, value]) =>
          `<circle cx="${x(size)}" cy="${y(value)}" r="3.5" fill="${series.color}"/><text x="${x(size) + 6}" y="${y(value) - 6}" font-size="11" fill="${series.color}">${short(value)}</text>`,
      ),
      `<line x1="${left + 10}" x2="${left + 34}" y1="${top + PANEL_H + 52 + index * 16}" y2="${top + PANEL_H + 52 + index * 16}" stroke="${series.color}" stroke-width="2"${series.dashed ? ' stroke-dasharray="6 4"' : ''}/>`,
      `<text x="${left + 40}" y="${top + PANEL_H + 56 + index * 16}" font-size="11">${escape(series.label)}</text>`,
    );
  });
  return parts.join('\n');
}

export function restartChartSvg(points: RestartPoint[], note: string, baseline?: RestartPoint[]): string {
  const sizes = [...new Set([...points, ...(baseline ?? [])].map((point) => point.events))].sort((a, b) => a - b);
  const line = (label: string, color: string, of: (point: RestartPoint) => number, from = points, dashed = false) => ({
    label,
    color,
    dashed,
    points: from.map((point) => [point.events, of(point)] as [number, number]),
  });
  /** A series drawn only where every point has the measure (older runs lack some). */
  const measured = (label: string, color: string, of: (point: RestartPoint) => number | undefined) =>
    points.every((point) => of(point) !== undefined) ? [line(label, color, (point) => of(point) as number)] : [];
  const before = (label: string, of: (point: RestartPoint) => number) =>
    baseline ? [line(`${label}before`, '#999', of, baseline, true)] : [];
  const panels: Panel[] = [
    {
      title: 'Time to ready after a restart',
      unit: 'seconds',
      series: [
        line('now: reads, dispatches and the work feed answer', '#1f6feb', (point) => point.timeToReadyS),
        ...measured('now, after a crash (SIGKILL)', '#cf222e', (point) => point.crashTimeToReadyS),
        ...before('', (point) => point.timeToReadyS),
      ],
      target: { value: 2, label: 'target 2 s' },
    },
    {
      title: 'Resident set: idle after ready, peak under load',
      unit: 'MB',
      series: [
        line('now, idle', '#2da44e', (point) => point.idleRssMb),
        ...measured("now, peak under figure 1's load", '#116329', (point) => point.loadPeakRssMb),
        ...before('', (point) => point.idleRssMb),
      ],
      target: { value: 250, label: 'target 250 MB idle (300 under load)' },
    },
    {
      title: 'Rebuild from zero against a plain scan',
      unit: 'events per second',
      series: [
        line('rebuild', '#8250df', (point) => point.rebuildEventsPerS),
        line('ordered scan', '#bf8700', (point) => point.scanRowsPerS, points, true),
      ],
    },
  ];
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" font-family="DejaVu Sans, sans-serif">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
    ...panels.map((panel, index) => panelSvg(panel, 80 + index * 420, 50, sizes)),
    `<text x="${WIDTH - 10}" y="${HEIGHT - 8}" font-size="11" fill="#666" text-anchor="end">${escape(note)}</text>`,
    '</svg>',
  ].join('\n');
}

/** Draws the chart to `file` (PNG) with headless Chromium; the SVG is written beside it. */
export async function drawRestartChart(
  points: RestartPoint[],
  file: string,
  note: string,
  baseline?: RestartPoint[],
): Promise<void> {
  await drawSvgAsPng(restartChartSvg(points, note, baseline), file, WIDTH, HEIGHT);
}

/** Writes `svg` beside `file` and draws it to `file` (PNG) with headless Chromium. */
export async function drawSvgAsPng(svg: string, file: string, width: number, height: number): Promise<void> {
  writeFileSync(file.replace(/\.png$/, '.svg'), svg);
  const browser = await chromium.launch({ executablePath: process.env.LEDGER_CHROMIUM ?? '/usr/bin/chromium' });
  try {
    const page = await browser.newPage({ viewport: { width, height } });
    await page.setContent(`<html><body style="margin:0">${svg}</body></html>`);
    await page.screenshot({ path: file });
  } finally {
    await browser.close();
  }
}
