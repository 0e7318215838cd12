import { OPERATOR_FACT_TYPES, OPERATOR_FACTS_BODY_SCHEMA, SUBMITTED_FACTS } from '@recovery-ledger/core';

/**
 * The body of `POST /v1/operator-facts` as the OpenAPI document publishes it: its one definition
 * (packages/core/src/facts/operator-facts-request.ts) with the fact typed per operator fact, each
 * one's data the same named schema the submit body refers to.
 */
export function operatorFactsSchemas(): Record<string, Record<string, unknown>> {
  const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
  const body = OPERATOR_FACTS_BODY_SCHEMA;
  return {
    ...Object.fromEntries(
      OPERATOR_FACT_TYPES.map((type) => [
        `${type}OperatorFact`,
        {
          type: 'object',
          description: SUBMITTED_FACTS[type].description,
          additionalProperties: false,
          required: ['type', 'data'],
          properties: { type: { type: 'string', enum: [type] }, data: ref(`${type}Data`) },
        },
      ]),
    ),
    OperatorFactsDto: {
      ...body,
      description:
        'One operator fact, and the operations to record it on (each with the event id of its copy; a resend appends nothing).',
      properties: {
        ...body.properties,
        fact: {
          type: 'object',
          oneOf: OPERATOR_FACT_TYPES.map((type) => ref(`${type}OperatorFact`)),
          discriminator: {
            propertyName: 'type',
            mapping: Object.fromEntries(
              OPERATOR_FACT_TYPES.map((type) => [type, `#/components/schemas/${type}OperatorFact`]),
            ),
          },
        },
      },
    },
  };
}
