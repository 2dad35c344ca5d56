import { EXIT, exitCodeFor, unknownCommand } from '../errors.ts';
import { agentCommand } from './commands/agent.ts';
import { checkCommand } from './commands/check.ts';
import type { Command } from './commands/command.ts';
import { doctorCommand } from './commands/doctor.ts';
import { healCommand } from './commands/heal.ts';
import { injectCommand } from './commands/inject.ts';
import { nodeCommand } from './commands/node.ts';
import { statusCommand } from './commands/status.ts';
import { versionCommand } from './commands/version.ts';
import { webhookCommand } from './commands/webhook.ts';
import type { CliIO } from './io.ts';
import { formatError } from './report-error.ts';

// The command table, in the order --help lists it.
const commands: readonly Command[] = [
  agentCommand,
  nodeCommand,
  checkCommand,
  healCommand,
  doctorCommand,
  statusCommand,
  injectCommand,
  webhookCommand,
  versionCommand,
];

function helpText(): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  const rows = commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`);
  return [
    'config-sync: keeps the ConfigMaps and Secrets mounted into a pod in step with the Kubernetes API',
    '',
    'Usage:',
    '  config-sync <command> [flags]',
    '',
    'Commands:',
    ...rows,
    '',
    'Flags:',
    "  -h, --help     print this help (or a command's, after the command)",
    '  -v, --version  same as "config-sync version"',
    '',
    'Exit codes: 0 ok, 1 drift found, 2 usage or configuration error, 3 API or permission error.',
    '',
  ].join('\n');
}

/**
 * Runs one invocation and returns its exit code. Never calls process.exit: the entry point
 * decides when the process ends, so logs can be flushed and tests can run this in-process.
 */
export async function runCli(argv: readonly string[], io: CliIO): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined || first === '-h' || first === '--help' || first === 'help') {
    io.stdout.write(helpText());
    return first === undefined ? EXIT.usage : EXIT.ok;
  }
  if (first === '-v' || first === '--version') return versionCommand.run([], io);

  try {
    const command = commands.find((c) => c.name === first);
    if (!command)
      throw unknownCommand(
        first,
        commands.map((c) => c.name),
      );
    if (rest.includes('-h') || rest.includes('--help')) {
      io.stdout.write(`${command.summary}\n\nUsage:\n  ${command.usage}\n`);
      return EXIT.ok;
    }
    return await command.run(rest, io);
  } catch (error) {
    io.stderr.write(formatError(error));
    return exitCodeFor(error);
  }
}
