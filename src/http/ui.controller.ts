import { Controller, Get, NotFoundException, Param, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { RequireAccess } from '../auth/access';
import { loadUiAssets, type UiAsset } from '../ui/ui-assets';

/**
 * The page talks to the public API from the same origin and nothing else: no inline script or
 * style, no third-party origin, no framing (it shows audit data), no referrer leaving the page.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The incident review page at /ui: static files only. Everything it shows it fetches from the
 * public /v1 API with the key the reviewer types in, so it can see exactly what that key may see.
 */
@ApiExcludeController()
@Controller('ui')
export class UiController {
  private readonly assets: Map<string, UiAsset> = loadUiAssets();

  @Get()
  @RequireAccess('public')
  page(@Res({ passthrough: true }) reply: FastifyReply): Buffer {
    return this.send(reply, 'index.html');
  }

  @Get(':file')
  @RequireAccess('public')
  file(@Param('file') file: string, @Res({ passthrough: true }) reply: FastifyReply): Buffer {
    return this.send(reply, file);
  }

  private send(reply: FastifyReply, file: string): Buffer {
    // Only a name loaded at start-up is served: `..`, a sub-folder or an unknown name is a 404.
    const asset = this.assets.get(file);
    if (!asset) throw new NotFoundException();
    reply
      .header('content-type', asset.contentType)
      .header('content-security-policy', CONTENT_SECURITY_POLICY)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      // Revalidated on every load, so a deploy is seen at once; the files are a few kilobytes.
      .header('cache-control', 'no-cache');
    return asset.body;
  }
}
