// The config-sync sidecar for a Pod spec: one definition, used by `inject` (and by the webhook,
// later), and matching deploy/sidecar/example/deployment.yaml (a test keeps them in step).
// Pure: a Pod spec in, the container and the pod-level changes out.
import type {
  V1Container,
  V1PodSpec,
  V1ResourceRequirements,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import { DEFAULT_STATE_DIR } from '../config/agent-settings.ts';
import { defaultSidecarRequirements } from '../config/sidecar-resources.ts';
import { volumeSources } from '../discover/targets.ts';

/**
 * The sidecar's Node flags, as the image sets them (deploy/image/Dockerfile): semi-spaces of the
 * young generation capped at 1 MiB, plenty for the agent's small, short-lived allocations (1 to
 * 5 MiB less resident, docs/benchmarks.md). The benchmark runs the agent, and the bare `node`
 * processes it is compared with, under the same flags.
 */
export const SIDECAR_NODE_OPTIONS = '--max-semi-space-size=1';

export const SIDECAR_NAME = 'config-sync';

/**
 * The sidecar's own emptyDir, at --state-dir: it holds the Pod's fingerprint key
 * (src/agent/digest-key.ts), which must outlive a sidecar restart and die with the Pod.
 */
export const STATE_VOLUME: V1Volume = {
  name: 'config-sync-state',
  emptyDir: { medium: 'Memory', sizeLimit: '1Mi' },
};
const STATE_MOUNT: V1VolumeMount = { name: 'config-sync-state', mountPath: DEFAULT_STATE_DIR };

export interface SidecarOptions {
  readonly image: string;
  readonly serviceAccount: string;
  /** The agent's own settings as environment variables (config/sidecar-settings.ts), e.g. CONFIG_SYNC_GRACE. */
  readonly agentEnv?: Readonly<Record<string, string>>;
  /** Its requests and limits (config/sidecar-resources.ts); unset: the defaults there. */
  readonly resources?: V1ResourceRequirements;
}

export const DEFAULT_SIDECAR: SidecarOptions = {
  image: 'config-sync:0.1.0',
  serviceAccount: 'config-sync-agent',
};

/**
 * The read-only mounts the agent needs: every mount of a ConfigMap, Secret or projected volume
 * by an app container, at the same path (and subPath), once each.
 */
export function configMounts(spec: V1PodSpec): V1VolumeMount[] {
  const notes: string[] = [];
  const configVolumes = new Set(
    (spec.volumes ?? []).filter((v) => volumeSources(v, notes).length > 0).map((v) => v.name),
  );
  const apps = [
    ...(spec.initContainers ?? []).filter((c) => c.restartPolicy === 'Always'),
    ...spec.containers,
  ].filter((c) => c.name !== SIDECAR_NAME);
  const seen = new Set<string>();
  const mounts: V1VolumeMount[] = [];
  for (const c of apps) {
    for (const m of c.volumeMounts ?? []) {
      if (!configVolumes.has(m.name)) continue;
      const key = `${m.mountPath}\0${m.name}\0${m.subPath ?? ''}`;
      if (seen.has(key)) continue;
      seen.add(key);
      mounts.push({
        name: m.name,
        mountPath: m.mountPath,
        ...(m.subPath ? { subPath: m.subPath } : {}),
        readOnly: true,
      });
    }
  }
  return mounts;
}

export function sidecarContainer(spec: V1PodSpec, options: SidecarOptions): V1Container {
  return {
    name: SIDECAR_NAME,
    image: options.image,
    imagePullPolicy: 'IfNotPresent',
    restartPolicy: 'Always',
    args: ['agent'],
    env: [
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      { name: 'NODE_OPTIONS', value: SIDECAR_NODE_OPTIONS },
      ...Object.entries(options.agentEnv ?? {}).map(([name, value]) => ({ name, value })),
    ],
    ports: [{ name: 'metrics', containerPort: 9464 }],
    volumeMounts: [...configMounts(spec), STATE_MOUNT],
    resources: options.resources ?? defaultSidecarRequirements(),
    // Complete on its own, so the sidecar passes Pod Security "restricted" whatever the Pod sets.
    securityContext: {
      runAsNonRoot: true,
      runAsUser: 65532,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
    startupProbe: { httpGet: { path: '/readyz', port: 'metrics' }, periodSeconds: 1, failureThreshold: 60 },
    livenessProbe: { httpGet: { path: '/healthz', port: 'metrics' }, periodSeconds: 30 },
    readinessProbe: { httpGet: { path: '/readyz', port: 'metrics' }, periodSeconds: 10 },
  };
}
