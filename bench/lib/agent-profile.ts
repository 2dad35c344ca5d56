import fs from 'node:fs';
import path from 'node:path';
import { waitFor } from '../../test/cluster/wait.ts';
import { type CpuProfile, formatProfileSummary, summarizeProfile } from '../cpu-profile.ts';
import { cpuProfDir } from './settings.ts';
import { log } from './table.ts';

/**
 * BENCH_CPU_PROF: once the agent was told to stop, waits for the profile node writes as it exits
 * into `written` (its scripts under `scriptRoot` as the agent saw them), copies it into
 * cpuProfDir as `agent-<label>.cpuprofile`, and writes and prints the summary of the updates'
 * window (bench/cpu-profile.ts).
 */
export async function agentProfile(
  written: string,
  scriptRoot: string,
  [fromUs, toUs]: readonly [number, number],
  updates: number,
  label: string,
): Promise<void> {
  const dir = cpuProfDir as string;
  const name = label.replace(/\W+/g, '-').replace(/-$/, '');
  // Parsed until it parses: the file appears before node has finished writing it.
  const profile = await waitFor(
    () => {
      for (const f of fs.existsSync(written) ? fs.readdirSync(written) : []) {
        try {
          return JSON.parse(fs.readFileSync(path.join(written, f), 'utf8')) as CpuProfile;
        } catch {
          // not whole yet
        }
      }
      return undefined;
    },
    { what: `the agent's CPU profile in ${written}`, timeoutMs: 20_000, intervalMs: 200 },
  );
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, `agent-${name}.cpuprofile`), JSON.stringify(profile));
  const summary = formatProfileSummary(
    summarizeProfile(profile, fromUs, toUs, scriptRoot, path.join(import.meta.dirname, '../../dist')),
    updates,
  );
  fs.writeFileSync(path.join(dir, `agent-${name}.txt`), `${summary}\n`);
  log(`agent CPU profile (${label}), the updates only:\n${summary}`);
}
