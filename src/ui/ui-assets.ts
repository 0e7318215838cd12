import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, extname, join } from 'node:path';

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

/**
 * The files the page is made of: every file of the assets folder with a known type (the page, its
 * style, its icon, the console's ES modules), read once at start-up. A request is answered from
 * this map by exact name; anything else under /ui is a 404, so no request path ever reaches the disk.
 */
export function loadUiAssets(root: string = packageRoot()): Map<string, UiAsset> {
  const folder = join(root, 'src', 'ui', 'assets');
  const assets = new Map<string, UiAsset>();
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    const contentType = entry.isFile() ? CONTENT_TYPES[extname(entry.name)] : undefined;
    if (contentType) assets.set(entry.name, { body: readFileSync(join(folder, entry.name)), contentType });
  }
  return assets;
}
