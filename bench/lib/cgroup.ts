// A real node's containers as the bench measures them: memory and CPU from their own cgroups (v1),
// as kubelet counts them.
import fs from 'node:fs';
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import type { Resident } from './table.ts';

/** A container's cgroup directory in one v1 hierarchy, found by its ID below the node's cgroup root. */
export function containerCgroup(hierarchy: string, containerId: string): string {
  const root = path.join('/sys/fs/cgroup', hierarchy, 'config-sync-node');
  const walk = (d: string): string | undefined => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      if (!e.isDirectory()) continue;
      const full = path.join(d, e.name);
      if (e.name.includes(containerId)) return full;
      const found = walk(full);
      if (found) return found;
    }
    return undefined;
  };
  const dir = walk(root);
  if (!dir) throw new Error(`no ${hierarchy} cgroup for container ${containerId}`);
  return dir;
}

/**
 * A container's working set as kubelet (cAdvisor) counts it on cgroup v1 (usage minus inactive
 * file pages), and its anonymous part (`total_rss`).
 */
export function containerMemory(containerId: string): Resident {
  const dir = containerCgroup('memory', containerId);
  const usage = Number(fs.readFileSync(path.join(dir, 'memory.usage_in_bytes'), 'utf8'));
  const stat = fs.readFileSync(path.join(dir, 'memory.stat'), 'utf8');
  const inactive = Number(/^total_inactive_file (\d+)$/m.exec(stat)?.[1] ?? 0);
  const anonymous = Number(/^total_rss (\d+)$/m.exec(stat)?.[1] ?? Number.NaN);
  return { total: (usage - Math.min(usage, inactive)) / 2 ** 20, anonymous: anonymous / 2 ** 20 };
}

/** A container's CPU time in seconds, from its cgroup (cpuNanos). */
export function containerCpuSeconds(containerId: string): number {
  return cpuNanos(containerId) / 1e9;
}

/** The containerd ID of a Pod's container (init containers included), from the Pod's status. */
export function containerIdOf(pod: V1Pod, name: string): string | undefined {
  return [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])]
    .find((c) => c.name === name)
    ?.containerID?.replace(/^containerd:\/\//, '');
}

export function cpuNanos(containerId: string): number {
  return Number(fs.readFileSync(path.join(containerCgroup('cpuacct', containerId), 'cpuacct.usage'), 'utf8'));
}
