import { runOnce } from '../../agent/oneshot.ts';
import { openRuntime } from '../../agent/runtime.ts';
import { agentConfig, targetSettings } from '../../config/agent-config.ts';
import { resolveSettings } from '../../config/settings.ts';
import { EXIT } from '../../errors.ts';
import { flagHelp } from '../flag-help.ts';
import type { CliIO } from '../io.ts';
import { checkLine, overall } from '../plan-format.ts';
import type { Command } from './command.ts';

export const checkCommand: Command = {
  name: 'check',
  summary:
    'compare the mounted ConfigMaps and Secrets with the API once; one line, and an exit code for probes',
  usage: `config-sync check [flags]\n\nFlags:\n${flagHelp(targetSettings)}\n\nExit: 0 in sync (or still propagating), 1 drift, 2 usage or configuration error, 3 API or permission error.`,
  async run(args: readonly string[], io: CliIO, env: NodeJS.ProcessEnv = process.env): Promise<number> {
    const settings = resolveSettings('check', targetSettings, args, env);
    const rt = await openRuntime(agentConfig('check', settings), env);
    for (const w of rt.config.warnings) io.stderr.write(`warning: ${w}\n`);
    const { verdicts } = await runOnce(rt, Date.now());
    io.stdout.write(`${checkLine(verdicts)}\n`);
    const state = overall(verdicts);
    return state === 'drift' ? EXIT.drift : state === 'unknown' ? EXIT.api : EXIT.ok;
  },
};
