import { parseArgs } from 'node:util';
import { badFlag } from '../../errors.ts';
import type { CliIO } from '../io.ts';
import { parseOutputFormat } from '../output-format.ts';
import { formatVersion, versionInfo } from '../version.ts';
import type { Command } from './command.ts';

export const versionCommand: Command = {
  name: 'version',
  summary: 'print the version of config-sync and of the Node.js running it',
  usage: 'config-sync version [-o text|json]',
  async run(args: readonly string[], io: CliIO): Promise<number> {
    let output: string | undefined;
    try {
      ({
        values: { output },
      } = parseArgs({ args: [...args], options: { output: { type: 'string', short: 'o' } }, strict: true }));
    } catch (error) {
      throw badFlag('version', (error as Error).message, error);
    }
    const info = versionInfo();
    io.stdout.write(
      parseOutputFormat(output) === 'json' ? `${JSON.stringify(info)}\n` : `${formatVersion(info)}\n`,
    );
    return 0;
  },
};
