/**
 * Exit codes, as scripts around git and kubectl expect them: 0 when the command did what was
 * asked, 1 when it ran and found a problem (an operation that does not exist, a broken hash chain,
 * an import that was refused), 2 when the command line itself is wrong (commander's own errors
 * land here too), 3 when the store or the service could not be reached, so a script can tell
 * "the ledger is broken" from "I could not look".
 */
export const EXIT = {
  ok: 0,
  failure: 1,
  usage: 2,
  unavailable: 3,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/**
 * An error the CLI reports as one line on stderr, with its exit code, and no stack trace; `code` is
 * the stable code of the service's problem+json answer, when there was one.
 */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode = EXIT.failure,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export const usageError = (message: string) => new CliError(message, EXIT.usage);
