// The injected sidecar's resources, as `inject` and the webhook take them (--sidecar-cpu-request,
// --sidecar-memory-request, --sidecar-memory-limit): the defaults are sized from the benchmarks
// (docs/benchmarks.md: about 20 MiB working set at idle, more at start-up and for large volumes),
// but a platform team with large volumes, or a LimitRange of its own, must be able to set them.
// Checked where they are given: a quantity Kubernetes refuses would otherwise make every Pod the
// webhook touches fail admission, or, with failurePolicy Ignore, come up without the sidecar.
import type { V1ResourceRequirements } from '@kubernetes/client-node';
import { ConfigSyncError } from '../errors.ts';
import type { SettingDef, Settings } from './settings.ts';

/** What the sidecar asks for unless told otherwise (deploy/sidecar/example has the same). */
export const DEFAULT_SIDECAR_RESOURCES = {
  cpuRequest: '10m',
  memoryRequest: '128Mi',
  memoryLimit: '192Mi',
} as const;

const SETTINGS = [
  { name: 'sidecar-cpu-request', field: 'cpuRequest', what: 'CPU request' },
  { name: 'sidecar-memory-request', field: 'memoryRequest', what: 'memory request' },
  { name: 'sidecar-memory-limit', field: 'memoryLimit', what: 'memory limit' },
] as const;

export const sidecarResourceSettings: readonly SettingDef[] = SETTINGS.map((s) => ({
  name: s.name,
  env: `CONFIG_SYNC_${s.name.toUpperCase().replaceAll('-', '_')}`,
  type: 'string' as const,
  valueName: 'quantity',
  description: `the injected agent's ${s.what} (default ${DEFAULT_SIDECAR_RESOURCES[s.field]})`,
}));

/** A Kubernetes quantity (resource.Quantity's grammar), e.g. 10m, 0.5, 128Mi, 1G, 1e3. */
const QUANTITY = /^\+?(\d+(\.\d*)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+)?$/;

const SUFFIX: Record<string, number> = {
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** The quantity's value (bytes, or cores), or undefined if it is not a quantity. */
export function quantityValue(text: string): number | undefined {
  const m = QUANTITY.exec(text);
  if (!m) return undefined;
  const suffix = m[3] ?? '';
  const exponent = /^[eE]/.test(suffix) ? 10 ** Number(suffix.slice(1)) : (SUFFIX[suffix] ?? 1);
  return Number(m[1]) * exponent;
}

/** The sidecar's resources from the settings given; any not given keeps its default. */
export function sidecarResources(command: string, settings: Settings): V1ResourceRequirements {
  const chosen: Record<keyof typeof DEFAULT_SIDECAR_RESOURCES, string> = { ...DEFAULT_SIDECAR_RESOURCES };
  const origin: Record<string, string> = {};
  for (const s of SETTINGS) {
    const given = settings.string(s.name);
    if (!given) continue;
    const value = quantityValue(given.value);
    if (value === undefined || value <= 0)
      throw new ConfigSyncError(
        'CS_USAGE_BAD_FLAG',
        `${command}: --${s.name} ${given.value} (from ${given.source}) is not a positive Kubernetes quantity`,
        { hint: `give a quantity such as ${DEFAULT_SIDECAR_RESOURCES[s.field]}` },
      );
    chosen[s.field] = given.value;
    origin[s.field] = given.source;
  }
  const request = quantityValue(chosen.memoryRequest) ?? 0;
  const limit = quantityValue(chosen.memoryLimit) ?? 0;
  if (request > limit)
    throw new ConfigSyncError(
      'CS_USAGE_BAD_FLAG',
      `${command}: the sidecar's memory request ${chosen.memoryRequest} (from ${origin.memoryRequest ?? 'the default'}) is above its limit ${chosen.memoryLimit} (from ${origin.memoryLimit ?? 'the default'}); Kubernetes refuses such a Pod`,
      { hint: 'raise --sidecar-memory-limit with the request, or lower the request' },
    );
  return requirements(chosen);
}

/** The three quantities as a container's requests and limits. */
function requirements(
  r: Readonly<Record<keyof typeof DEFAULT_SIDECAR_RESOURCES, string>>,
): V1ResourceRequirements {
  return { requests: { cpu: r.cpuRequest, memory: r.memoryRequest }, limits: { memory: r.memoryLimit } };
}

/** The defaults as a container's requests and limits, a new object each time (inject/sidecar.ts, where none are given). */
export function defaultSidecarRequirements(): V1ResourceRequirements {
  return requirements(DEFAULT_SIDECAR_RESOURCES);
}
