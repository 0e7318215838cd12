import { Controller, Get, Header, Inject } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { RequireAccess } from '../auth/access';
import { CONFIG, type LedgerConfig } from '../config/ledger-config';
import { envelopeJsonSchema } from '@recovery-ledger/core';

@ApiTags('schema')
@Controller('v1/schema')
export class SchemaController {
  private readonly schema: Record<string, unknown>;

  constructor(@Inject(CONFIG) config: LedgerConfig) {
    this.schema = envelopeJsonSchema(config.envelopeLimits);
  }

  @Get('envelope')
  @RequireAccess('public')
  @Header('content-type', 'application/schema+json')
  @ApiOperation({
    summary: "The envelope's JSON Schema, for runtimes in any language.",
    description:
      'Generated from the vocabularies and limits the ledger validates with (safe_details keys as configured), so a tool validated by it is accepted.',
  })
  @ApiOkResponse({ description: 'A JSON Schema (draft 2020-12).' })
  envelope() {
    return this.schema;
  }
}
