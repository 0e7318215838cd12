import { Controller, Get, Header, Inject, NotFoundException, Param, Res } from '@nestjs/common';
import { ApiExcludeController, type OpenAPIObject } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { RequireAccess } from '../auth/access';
import { OpenApiDocumentHolder } from '../openapi/openapi.module';

/** The Swagger UI files this page loads, from swagger-ui-dist (a dependency of @nestjs/swagger). */
const SWAGGER_ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
};

function swaggerUiDir(): string {
  const nestSwagger = require.resolve('@nestjs/swagger');
  return dirname(require.resolve('swagger-ui-dist/package.json', { paths: [nestSwagger] }));
}

/** Serves the Swagger UI files, read on first use: most deployments never open /docs, and the bundle is over a megabyte. */
class SwaggerUiAssets {
  private readonly read = new Map<string, Buffer>();

  send(name: string, reply: FastifyReply): Buffer {
    const type = SWAGGER_ASSETS[name];
    if (!type) throw new NotFoundException();
    let body = this.read.get(name);
    if (!body) {
      body = readFileSync(join(swaggerUiDir(), name));
      this.read.set(name, body);
    }
    reply.header('content-type', type).header('cache-control', 'public, max-age=86400');
    return body;
  }
}

// No inline script: the page works under a Content-Security-Policy without 'unsafe-inline'.
const DOCS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Recovery Ledger API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/swagger-ui-standalone-preset.js"></script>
<script src="/docs/docs-init.js"></script>
</body>
</html>
`;

const DOCS_INIT_JS = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: '/docs/openapi.json',
    dom_id: '#swagger-ui',
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    layout: 'StandaloneLayout',
    // Keys typed into "Authorize" stay in this page's memory only.
    persistAuthorization: false
  });
});
`;

/** `/docs` (Swagger UI) and `/docs/openapi.json`: public, like the envelope's schema. */
@ApiExcludeController()
@Controller('docs')
export class DocsController {
  private readonly swaggerUi = new SwaggerUiAssets();

  constructor(@Inject(OpenApiDocumentHolder) private readonly holder: OpenApiDocumentHolder) {}

  @Get()
  @RequireAccess('public')
  @Header('content-type', 'text/html; charset=utf-8')
  page(): string {
    return DOCS_HTML;
  }

  @Get('openapi.json')
  @RequireAccess('public')
  @Header('content-type', 'application/json; charset=utf-8')
  openapi(): OpenAPIObject {
    if (!this.holder.document) throw new NotFoundException();
    return this.holder.document;
  }

  @Get('docs-init.js')
  @RequireAccess('public')
  @Header('content-type', 'text/javascript; charset=utf-8')
  init(): string {
    return DOCS_INIT_JS;
  }

  @Get(':asset')
  @RequireAccess('public')
  asset(@Param('asset') name: string, @Res({ passthrough: true }) reply: FastifyReply): Buffer {
    return this.swaggerUi.send(name, reply);
  }
}
