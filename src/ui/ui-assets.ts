import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

export interface UiAsset {
  body: Buffer;
  contentType: string;
}

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** The files the page is made of; anything else under /ui is a 404, so no path ever reaches the disk. */
export const UI_FILES = ['index.html', 'app.js', 'app.css', 'favicon.svg'] as const;
export type UiFile = (typeof UI_FILES)[number];

/**
 * The package root, found from this file: `src/ui` when run from source (tests), `dist/src/ui`
 * when built. The assets are read from the source folder in both cases, so `tsc` needs no copy
 * step and the built service serves exactly what is committed.
 */
export function packageRoot(from: string = __dirname): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'src', 'ui', 'assets'))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package root with src/ui/assets above ${from}`);
  }
}

export function loadUiAssets(root: string = packageRoot()): Map<UiFile, UiAsset> {
  const assets = new Map<UiFile, UiAsset>();
  for (const file of UI_FILES) {
    const extension = file.slice(file.lastIndexOf('.'));
    assets.set(file, {
      body: readFileSync(join(root, 'src', 'ui', 'assets', file)),
      contentType: CONTENT_TYPES[extension],
    });
  }
  return assets;
}
