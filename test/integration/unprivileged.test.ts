// The agent as the image runs it: UID 65532, not root, against volumes root (kubelet) writes.
// kubelet makes each new payload directory 0700 (os.MkdirTemp) and chmods it 0755 only after,
// so a watcher that follows kubelet into payload directories can be refused (EACCES) and fall
// back to polling for good. Here a payload directory is held in that closed state, as if
// kubelet were between the two calls, while a burst of updates lands: the agent must keep its
// inotify watch and follow every update.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../cluster/wait.ts';
import { useNamespace } from './support.ts';
import { AgentProcess, type AppPod, createApp, sample, updateConfig, writeMount } from './support-app.ts';

const NONROOT = { uid: 65532, gid: 65532 };
const isRoot = process.getuid?.() === 0;

/** Opens the Pod's files to the agent's UID the way kubelet's modes do (0755 dirs, 0644 files). */
function openTo(pod: AppPod, owner: { uid: number; gid: number }): void {
  const walk = (p: string) => {
    const st = fs.lstatSync(p);
    if (st.isSymbolicLink()) return;
    fs.chmodSync(p, st.isDirectory() ? 0o755 : 0o644);
    if (st.isDirectory()) for (const e of fs.readdirSync(p)) walk(path.join(p, e));
  };
  walk(pod.mountRoot);
  // The sidecar's own emptyDir is the one place it writes.
  fs.chownSync(pod.env.CONFIG_SYNC_STATE_DIR as string, owner.uid, owner.gid);
}

const title = 'the agent as UID 65532';
describe.skipIf(!isRoot)(
  isRoot ? title : `${title} (skipped: the test must run as root to hold kubelet’s part)`,
  () => {
    const ns = useNamespace('unprivileged');

    it('a payload directory it may not enter does not cost it its inotify watch', async () => {
      const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
      openTo(pod, NONROOT);
      const agent = AgentProcess.start(pod, ['--grace', '30s'], NONROOT);
      try {
        await agent.waitFor((l) => l.state === 'InSync', 'the first verdict InSync');

        // kubelet between MkdirTemp (0700) and its chmod, held open for the whole burst.
        const volume = path.join(pod.mountRoot, 'etc/app');
        fs.mkdirSync(path.join(volume, '..2026_12_03_00_00_00.4242'), { mode: 0o700 });
        let last = '';
        for (let i = 0; i < 20; i++) {
          last = `level: debug-${i}\n`;
          await updateConfig(ns.admin, ns.name, { 'app.yaml': last });
          writeMount(pod.mountRoot, { 'app.yaml': last });
        }

        const metrics = await waitFor(
          async () => {
            const text = await agent.metrics();
            const read = fs.readFileSync(path.join(volume, 'app.yaml'), 'utf8');
            return read === last && sample(text, 'config_sync_in_sync') === 1 ? text : undefined;
          },
          { what: 'in sync on the last update' },
        );
        expect(sample(metrics, 'config_sync_file_watch_polling')).toBe(0);
        expect(agent.lines.filter((l) => l.msg.startsWith('inotify refused'))).toEqual([]);
      } finally {
        await agent.stop();
      }
    });
  },
);
