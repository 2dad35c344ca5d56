import type { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import type { ControlPlane } from '../../test/cluster/control-plane.ts';
import type { InClusterLayout } from '../../test/cluster/in-cluster.ts';

/**
 * What the process-level measures share: the control plane and a client of it as the admin, the
 * `bench` namespace with its 100-key ConfigMap `app` (`data`) laid out kubelet's way under
 * `mount`, the agent's in-Pod identity (`layout`), and the agent's command line for a port.
 */
export interface ProcessBench {
  readonly kc: KubeConfig;
  readonly core: CoreV1Api;
  readonly plane: ControlPlane;
  readonly namespace: string;
  readonly data: Readonly<Record<string, string>>;
  readonly mount: string;
  readonly layout: InClusterLayout;
  readonly agentArgs: (port: number, watch?: string, mountRoot?: string) => string[];
}
