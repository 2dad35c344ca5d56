import { runOnce } from '../../agent/oneshot.ts';
import { openRuntime } from '../../agent/runtime.ts';
import { agentConfig } from '../../config/agent-config.ts';
import { targetSettings } from '../../config/agent-settings.ts';
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
  usage: `config-sync check [flags]\n\nFlags:\n${flagHelp(targetSettings)}\n\nExit: 0 in sync (or still propagating), 1 drift, 2 usage or configuration error (a mount that cannot be read), 3 API or permission error.`,
  async run(args: readonly string[], io: CliIO, env: NodeJS.ProcessEnv = process.env): Promise<number> {
    const settings = resolveSettings('check', targetSettings, args, env);
    const rt = await openRuntime(agentConfig('check', settings), env);
    for (const w of rt.config.warnings) io.stderr.write(`warning: ${w}\n`);
    for (const p of rt.annotationProblems) io.stderr.write(`warning: invalid annotation: ${p}\n`);
    const { verdicts } = await runOnce(rt, Date.now());
    io.stdout.write(`${checkLine(verdicts)}\n`);
    const state = overall(verdicts);
    if (state === 'drift') return EXIT.drift;
    if (state !== 'unknown') return EXIT.ok;
    // What could not be judged: the files (a --watch path or a mount that is not there, a key
    // the agent may not read) are a configuration error (2); the API, an API error (3). A
    // missing watched directory exited 3, the API's code, before.
    const unknown = verdicts.filter((v) => v.state === 'Unknown');
    return unknown.every((v) => v.reason === 'FilesUnreadable') ? EXIT.usage : EXIT.api;
  },
};
