import { ValidationPipe, type ValidationError } from '@nestjs/common';
import { LedgerProblem } from '@recovery-ledger/core/errors/ledger-problem';

/** The first failing field as a dotted path (`events[0].data.tool`), for a 400 that names it. */
export function firstViolation(errors: ValidationError[], prefix = ''): { field: string; reason: string } {
  const error = errors[0];
  const segment = /^\d+$/.test(error.property) ? `[${error.property}]` : prefix ? `.${error.property}` : error.property;
  const field = `${prefix}${segment}`;
  if (error.children && error.children.length > 0) return firstViolation(error.children, field);
  const reason = Object.values(error.constraints ?? {})[0] ?? 'is invalid';
  // The property is the client's own key: taken literally (as a pattern, `(` threw and `.*` ate the reason).
  return {
    field,
    reason: reason.startsWith(error.property) ? reason.slice(error.property.length).trimStart() : reason,
  };
}

const VALIDATOR_OPTIONS = {
  whitelist: true,
  forbidNonWhitelisted: true,
  forbidUnknownValues: true,
  stopAtFirstError: true,
} as const;

export function badRequest(errors: ValidationError[], prefix = ''): LedgerProblem {
  const { field, reason } = firstViolation(errors, prefix);
  return new LedgerProblem('BAD_REQUEST', `${field} ${reason}`, { field });
}

/** Whitelisting, no unknown properties, errors as 400 BAD_REQUEST naming the field. */
export function ledgerValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    ...VALIDATOR_OPTIONS,
    transform: true,
    validationError: { target: false, value: false },
    exceptionFactory: (errors) => badRequest(errors),
  });
}
