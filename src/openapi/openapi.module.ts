import { Injectable, Module, type INestApplication } from '@nestjs/common';
import type { OpenAPIObject } from '@nestjs/swagger';
import { buildOpenApiDocument } from './openapi-document';

/** Holds the document built once the routes are known (see mountOpenApi); served as built. */
@Injectable()
export class OpenApiDocumentHolder {
  document: OpenAPIObject | undefined;
}

/** The document's holder; the HTTP layer serves it at /docs. */
@Module({
  providers: [OpenApiDocumentHolder],
  exports: [OpenApiDocumentHolder],
})
export class OpenApiModule {}

/** Builds the document from the application's routes and hands it to /docs/openapi.json. */
export function mountOpenApi(app: INestApplication): void {
  app.get(OpenApiDocumentHolder).document = buildOpenApiDocument(app);
}
