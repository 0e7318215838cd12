import type { INestApplication } from '@nestjs/common';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { ModulesContainer } from '@nestjs/core';
import { DocumentBuilder, SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import { ACCESS_KEY, ROLE_ACCESS, type Access } from '../auth/access';
import type { Role } from '../auth/caller';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../ui/ui-assets';
import { typeFacts } from './fact-schemas';

export const BEARER_SCHEME = 'api_key';
// Found from the package root, so the built service and the sources run in process read one file.
const PACKAGE_VERSION = (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string })
  .version;

type Operation = {
  operationId?: string;
  security?: Array<Record<string, string[]>>;
  description?: string;
  responses?: Record<string, unknown>;
};

/** `${Controller}_${method}` → the access the route declares with @RequireAccess (src/auth/access.ts). */
function declaredAccess(app: INestApplication): Map<string, Access | undefined> {
  const access = new Map<string, Access | undefined>();
  for (const module of app.get(ModulesContainer).values()) {
    for (const wrapper of module.controllers.values()) {
      const controller = wrapper.metatype as (new (...args: never[]) => unknown) | null;
      if (!controller || typeof controller !== 'function') continue;
      const classAccess = Reflect.getMetadata(ACCESS_KEY, controller) as Access | undefined;
      for (const name of Object.getOwnPropertyNames(controller.prototype)) {
        const handler = (controller.prototype as Record<string, unknown>)[name];
        if (name === 'constructor' || typeof handler !== 'function') continue;
        if (
          Reflect.getMetadata(PATH_METADATA, handler) === undefined &&
          Reflect.getMetadata(METHOD_METADATA, handler) === undefined
        )
          continue;
        access.set(
          `${controller.name}_${name}`,
          (Reflect.getMetadata(ACCESS_KEY, handler) as Access | undefined) ?? classAccess,
        );
      }
    }
  }
  return access;
}

const rolesFor = (access: Access): Role[] =>
  (Object.keys(ROLE_ACCESS) as Role[]).filter((role) => ROLE_ACCESS[role].includes(access));

/**
 * The OpenAPI document, generated from the controllers' decorators. The served document
 * (/docs/openapi.json), the committed one (openapi.json, written by `npm run generate`) and the
 * drift test all come from this function, so they cannot disagree without the test failing.
 *
 * Each operation's security follows the route's @RequireAccess: public routes need no key, the
 * others name the roles that may call them, so a client generated from the document knows which
 * key to send without reading the guard.
 */
export function buildOpenApiDocument(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('Recovery Ledger')
    .setDescription(
      'An event-sourced recovery ledger for agent tool calls. Errors are application/problem+json with a stable `code`; ' +
        'refusals carry the `directive`. With no API keys configured the service runs in local mode (loopback only, no key).',
    )
    .setVersion(PACKAGE_VERSION)
    .addBearerAuth(
      { type: 'http', scheme: 'bearer', description: 'An API key from LEDGER_API_KEYS (`key:role:tenant`).' },
      BEARER_SCHEME,
    )
    .build();
  const document = SwaggerModule.createDocument(app, config, {
    operationIdFactory: (controllerKey, methodKey) => `${controllerKey}_${methodKey}`,
  });
  const access = declaredAccess(app);
  for (const pathItem of Object.values(document.paths)) {
    for (const operation of Object.values(pathItem) as Operation[]) {
      if (!operation || typeof operation !== 'object' || !operation.operationId) continue;
      const rule = access.get(operation.operationId);
      if (rule === undefined) continue;
      if (rule === 'public') {
        operation.security = [];
        continue;
      }
      operation.security = [{ [BEARER_SCHEME]: [] }];
      const roles = rolesFor(rule);
      const note = `Needs a key with the role ${roles.join(' or ')} (access \`${rule}\`).`;
      operation.description = operation.description ? `${operation.description}\n\n${note}` : note;
      operation.responses = {
        ...operation.responses,
        401: operation.responses?.['401'] ?? {
          description: 'UNAUTHENTICATED: no key, or a key that is not known (application/problem+json).',
        },
        403: operation.responses?.['403'] ?? {
          description: "FORBIDDEN: the key's role does not allow this (application/problem+json).",
        },
      };
    }
  }
  return typeFacts(document);
}
