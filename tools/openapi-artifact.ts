import type { OpenAPIObject } from '@nestjs/swagger';
import { createApp } from '../src/app';
import { loadConfig } from '../src/config/ledger-config';
import { buildOpenApiDocument } from '../src/openapi/openapi-document';

/**
 * The committed document (openapi.json): built from the application itself, in preview mode so no
 * store is opened and nothing listens, with the configuration of an empty environment so the file
 * does not depend on the machine that generated it.
 */
export async function generateOpenApiDocument(): Promise<OpenAPIObject> {
  const app = await createApp({ config: loadConfig({}), apiKeys: [] }, { preview: true });
  try {
    return buildOpenApiDocument(app);
  } finally {
    await app.close();
  }
}
