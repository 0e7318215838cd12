import { Module, type INestApplication } from '@nestjs/common';
import { DocsController, OpenApiDocumentHolder } from './docs.controller';
import { buildOpenApiDocument } from './openapi-document';

@Module({
  controllers: [DocsController],
  providers: [OpenApiDocumentHolder],
})
export class OpenApiModule {}

/** Builds the document from the application's routes and hands it to /docs/openapi.json. */
export function mountOpenApi(app: INestApplication): void {
  app.get(OpenApiDocumentHolder).document = buildOpenApiDocument(app);
}
