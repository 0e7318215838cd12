#!/usr/bin/env node
import 'reflect-metadata';
import { Command, CommanderError, Help, InvalidArgumentError, Option } from 'commander';
import { CliError, EXIT } from './cli-errors';
import type { OperatorFact } from '@recovery-ledger/core';
import type { ProgressMode } from './commands/projections-rebuild.command';
import type { GlobalOptions } from './ledger-source';

// Each command is loaded when it runs: `--help` and `replay` should not pay for the projection
// engine and NestJS, which only `projections rebuild` needs.
const commands = {
  replay: () => import('./commands/replay.command'),
  evidence: () => import('./commands/evidence.command'),
  tail: () => import('./commands/tail.command'),
  rebuild: () => import('./commands/projections-rebuild.command'),
  export: () => import('./commands/export.command'),
  import: () => import('./commands/import.command'),
  verify: () => import('./commands/verify.command'),
  mcpGateway: () => import('./commands/mcp-gateway.command'),
  operator: () => import('./commands/operator.command'),
  triage: () => import('./commands/triage.command'),
};

function nonNegativeInteger(name: string) {
  return (raw: string): number => {
    if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw)))
      throw new InvalidArgumentError(`${name} must be a non-negative integer.`);
    return Number(raw);
  };
}

const EXIT_CODES_HELP = `
Exit codes:
  0  done
  1  the command ran and found a problem (no such operation, a broken hash chain, a refused import)
  2  the command line is wrong (unknown command or option, missing argument)
  3  the store or the service could not be reached

Environment:
  LEDGER_DATA_DIR   data directory when --data-dir is not given (default ./data)
  LEDGER_STORE, EVENTSTORE_CONNECTION_STRING   the store, read as the service reads them
  LEDGER_URL        service URL when --url is not given
  LEDGER_API_KEY    key for --url (safer than --key, which other users can see in ps)`;

export function buildProgram(): Command {
  const program = new Command('recovery-ledger')
    .description('Replay, inspect, export and verify a Recovery Ledger, on its data directory or through its HTTP API.')
    .version(require('../../../package.json').version as string, '-V, --version')
    .addOption(new Option('-d, --data-dir <dir>', 'the service data directory (local commands)').env('LEDGER_DATA_DIR'))
    .addOption(
      new Option('-u, --url <url>', 'a running service, e.g. http://127.0.0.1:3000 (all but tail and import)').env(
        'LEDGER_URL',
      ),
    )
    .addOption(new Option('-k, --key <key>', 'API key for --url').env('LEDGER_API_KEY'))
    .addOption(
      new Option('-t, --tenant <tenant>', 'tenant of the operations (local commands; a key fixes its own)').default(
        'default',
      ),
    )
    .showHelpAfterError('(run with --help for usage)')
    // Commander lists a mandatory option like any other; say so, or the first try exits 2.
    .configureHelp({
      optionDescription(option) {
        const described = Help.prototype.optionDescription.call(this, option);
        return option.mandatory ? `${described} (required)` : described;
      },
    })
    .addHelpText('after', EXIT_CODES_HELP)
    .exitOverride();
  const globals = (command: Command) => command.optsWithGlobals() as GlobalOptions & Record<string, unknown>;

  program
    .command('replay')
    .description("print an operation's timeline: every event, the state after it, and why")
    .argument('<ref>', 'the operation_ref, e.g. run_81/step_4')
    .addOption(
      new Option('--as-of <revision>', 'stop at this revision (the state as it stood then)').argParser(
        nonNegativeInteger('--as-of'),
      ),
    )
    .option('--json', 'machine-readable output')
    .action(async (ref: string, options: { asOf?: number; json?: boolean }, command: Command) =>
      (await commands.replay()).replayCommand(globals(command), ref, options),
    );

  program
    .command('evidence')
    .description(
      "print an operation's evidence trail and verdict: what was tried, what came back, how the outcome is proven",
    )
    .argument('<ref>', 'the operation_ref')
    .option('--json', 'machine-readable output')
    .action(async (ref: string, options: { json?: boolean }, command: Command) =>
      (await commands.evidence()).evidenceCommand(globals(command), ref, options),
    );

  program
    .command('tail')
    .description('follow the global log as events are appended (Ctrl-C to stop)')
    .addOption(
      new Option(
        '--from <position>',
        'start after this global position (0: from the beginning); default: now',
      ).argParser(nonNegativeInteger('--from')),
    )
    .option('--no-follow', 'print what is there and exit')
    .option('--json', 'one NDJSON event a line, as export writes them')
    .action(async (options: { from?: number; follow: boolean; json?: boolean }, command: Command) =>
      (await commands.tail()).tailCommand(globals(command), options),
    );

  const projections = program.command('projections').description('manage the read models');
  projections
    .command('rebuild')
    .description('rebuild projections from the log, from zero (on a data directory: stop the service first; or --url)')
    .argument('[name]', 'one projection (step_state, evidence_trail, run_summary, trust_metrics); default: all')
    .addOption(
      new Option('--progress <mode>', 'progress bar on stderr').choices(['auto', 'always', 'never']).default('auto'),
    )
    .action(async (name: string | undefined, options: { progress: ProgressMode }, command: Command) => {
      await (await commands.rebuild()).rebuildCommand(globals(command), name, options);
    });

  program
    .command('export')
    .description("write the log as NDJSON, every event with its hash chain (with --url: the key's tenant, admin key)")
    .option('-o, --out <file>', 'write to a file instead of stdout')
    .addOption(
      new Option(
        '--format <format>',
        'ndjson (the archive import reads) or cloudevents (CloudEvents 1.0, one JSON event per line)',
      )
        .choices(['ndjson', 'cloudevents'])
        .default('ndjson'),
    )
    .action(async (options: { out?: string; format?: 'ndjson' | 'cloudevents' }, command: Command) =>
      (await commands.export()).exportCommand(globals(command), options),
    );

  program
    .command('import')
    .description('load an export into an empty store (running it again is a no-op); checks counts and hash chains')
    .argument('<file>', 'an export file, or - for stdin')
    .action(async (file: string, _options: unknown, command: Command) => {
      await (await commands.import()).importCommand(globals(command), file);
    });

  program
    .command('verify')
    .description(
      "audit the whole log: every stream's hash chain, each stream's anchored head, the log anchor; report every fault and exit 1 on any",
    )
    .option('--json', 'machine-readable output')
    .option('--read-models', 'also rebuild the projections in memory and compare them with the stored read model')
    .option(
      '--since <checkpoint>',
      'a checkpoint written earlier by --checkpoint-out: prove the log has only grown since',
    )
    .option(
      '--checkpoint-out <file>',
      'after a clean audit, write the checkpoint of the log as it stands (keep it outside the store)',
    )
    .option(
      '--archive <file>',
      'check an export file offline: its chains, and the stream heads and log anchor in its footer',
    )
    .option(
      '--witness <file>',
      'the head witness the service keeps (default LEDGER_HEAD_WITNESS_FILE): fail if the log was rolled back behind it',
    )
    .option(
      '--tail',
      "check only what was appended after the data directory's verified checkpoint, as the service does at start",
    )
    .action(
      async (
        options: {
          json?: boolean;
          readModels?: boolean;
          since?: string;
          checkpointOut?: string;
          archive?: string;
          witness?: string;
          tail?: boolean;
        },
        command: Command,
      ) => (await commands.verify()).verifyCommand(globals(command), options),
    );

  program
    .command('triage')
    .description(
      'list what needs a person now, newest first: escalations, approvals, unknown outcomes, overdue work; then the unknown outcomes a lookup may still settle (GET /v1/triage)',
    )
    .addOption(new Option('--kind <kind>', 'only this kind (acknowledged: the escalations someone has)'))
    .option('--tool <tool>', 'only steps of this tool')
    .option('--run-id <run_id>', 'only steps of this run')
    .option('--json', 'machine-readable output')
    .action(async (options: { kind?: string; tool?: string; runId?: string; json?: boolean }, command: Command) =>
      (await commands.triage()).triageCommand(globals(command), options),
    );

  // The operator's actions (docs/contract.md §4.10), through a running service with an operator key.
  const refsArgument = (command: Command) =>
    command
      .argument('[refs...]', 'the operation_ref(s); each gets its own result line')
      .option('--from-file <file>', 'more refs, one a line (- for stdin)');
  const act = async (
    command: Command,
    refs: string[],
    options: { fromFile?: string; json?: boolean },
    fact: OperatorFact,
  ) => {
    const operator = await commands.operator();
    await operator.operatorCommand(globals(command), operator.refsOf(refs, options.fromFile), fact, options);
  };

  refsArgument(
    program
      .command('resolve')
      .description(
        'record what you found for an unknown outcome: --found <evidence_ref> or --not-found (operator key, --url)',
      ),
  )
    // One of the two is required: said on both, as commander marks a mandatory option.
    .addOption(
      new Option(
        '--found <evidence_ref>',
        "the write committed: what you saw (the provider's id of it) (required: this or --not-found)",
      ).conflicts('notFound'),
    )
    .addOption(new Option('--not-found', 'the write is not at the provider (required: this or --found)'))
    .requiredOption('--note <text>', 'what you checked, for the evidence trail')
    .option('--json', 'machine-readable output')
    .action(
      async (
        refs: string[],
        options: { found?: string; notFound?: boolean; note: string; fromFile?: string; json?: boolean },
        command: Command,
      ) => act(command, refs, options, (await commands.operator()).resolveFact(options)),
    );

  refsArgument(
    program
      .command('cancel')
      .description('cancel a step: terminal, and every later dispatch is refused (operator key, --url)'),
  )
    .requiredOption('--reason <text>', 'why')
    .option('--json', 'machine-readable output')
    .action(async (refs: string[], options: { reason: string; fromFile?: string; json?: boolean }, command: Command) =>
      act(command, refs, options, { type: 'StepCancelled', data: { reason: options.reason } }),
    );

  refsArgument(
    program.command('reopen').description('give an escalated step a new, bounded attempt budget (operator key, --url)'),
  )
    .addOption(
      new Option('--attempts <n>', 'attempts beyond those used, 1 to 10')
        .argParser(nonNegativeInteger('--attempts'))
        .makeOptionMandatory(),
    )
    .requiredOption('--reason <text>', 'why')
    .option('--json', 'machine-readable output')
    .action(
      async (
        refs: string[],
        options: { attempts: number; reason: string; fromFile?: string; json?: boolean },
        command: Command,
      ) =>
        act(command, refs, options, {
          type: 'StepReopened',
          data: { attempts: options.attempts, reason: options.reason },
        }),
    );

  refsArgument(
    program
      .command('ack')
      .description('acknowledge an escalation: it leaves "Needs a person" and stays escalated (operator key, --url)'),
  )
    .requiredOption('--assignee <name>', 'who has it')
    .option('--note <text>', 'a note for the evidence trail')
    .option('--reassign', 'take it from the assignee who has it (without it, another assignee is refused)')
    .option('--json', 'machine-readable output')
    .action(
      async (
        refs: string[],
        options: { assignee: string; note?: string; reassign?: boolean; fromFile?: string; json?: boolean },
        command: Command,
      ) =>
        act(command, refs, options, {
          type: 'EscalationAcknowledged',
          data: {
            assignee: options.assignee,
            ...(options.note === undefined ? {} : { note: options.note }),
            ...(options.reassign === true ? { reassign: true } : {}),
          },
        }),
    );

  program
    .command('mcp-gateway')
    .description(
      'serve an MCP gateway on stdio: upstream MCP tools pass through, write tools run through the ledger (docs/mcp-gateway.md)',
    )
    .requiredOption('-c, --config <file>', 'the gateway configuration (JSON)')
    .action(async (options: { config: string }, command: Command) =>
      (await commands.mcpGateway()).mcpGatewayCommand(globals(command), options),
    );

  return program;
}

export async function run(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return EXIT.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version are successes; every other commander error is a usage error, already printed.
      return error.code === 'commander.helpDisplayed' ||
        error.code === 'commander.version' ||
        error.code === 'commander.help'
        ? EXIT.ok
        : EXIT.usage;
    }
    if (error instanceof CliError) {
      process.stderr.write(`recovery-ledger: ${error.message}\n`);
      return error.exitCode;
    }
    process.stderr.write(
      `recovery-ledger: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    return EXIT.failure;
  }
}

if (require.main === module) {
  // `recovery-ledger tail | head` closes the pipe early: that is the reader's choice, not a failure.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(EXIT.ok);
    throw error;
  });
  void run(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
