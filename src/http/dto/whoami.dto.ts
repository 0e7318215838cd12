import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

/**
 * The OpenAPI shapes of the caller, for the document only: src/http/whoami.controller.ts declares the
 * routes.
 */
export class WhoAmIDto {
  @ApiProperty({ enum: ['runtime', 'approver', 'operator', 'auditor', 'admin'] }) role!: string;
  @ApiProperty() tenant!: string;
  @ApiProperty({ description: "The key's id, as events record their actor (never the key)." }) actor!: string;
  @ApiPropertyOptional({
    description: 'Local mode: no keys configured, loopback only; the one caller may do everything.',
  })
  local?: boolean;
}
