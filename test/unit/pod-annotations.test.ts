// A workload's annotations as the sidecar and the node agent read them: every value checked,
// a value that cannot be read never replaced by a default in silence (the Pod is then never
// restarted), and the agent's flags overridden for that Pod only.
import { describe, expect, it } from 'vitest';
import { type AgentConfig, agentConfig } from '../../src/config/agent-config.ts';
import { agentSettings } from '../../src/config/agent-settings.ts';
import { parsePodAnnotations, readPodAnnotations } from '../../src/config/pod-annotations.ts';
import { resolveSettings } from '../../src/config/settings.ts';

const config = (...args: string[]): AgentConfig =>
  agentConfig('agent', resolveSettings('agent', agentSettings, args, {}));

describe('parsePodAnnotations', () => {
  it('reads no annotations as no say at all', () => {
    expect(parsePodAnnotations(undefined, 'sidecar')).toEqual({
      selection: { ignore: [], secretEnv: 'restart' },
      lines: [],
      problems: [],
    });
  });

  it('reads ignore entries separated by commas or spaces, kinds in any case, each once', () => {
    const said = parsePodAnnotations(
      { 'config-sync.io/ignore': 'volume/cache, ConfigMap/flags  secret/tls,configmap/flags' },
      'node',
    );
    expect(said.problems).toEqual([]);
    expect(said.selection.ignore).toEqual([
      { kind: 'volume', name: 'cache' },
      { kind: 'ConfigMap', name: 'flags' },
      { kind: 'Secret', name: 'tls' },
    ]);
  });

  it.each([
    [
      'config-sync.io/ignore',
      'pvc/data',
      'has "pvc/data", which is not volume/NAME, configmap/NAME or secret/NAME',
    ],
    ['config-sync.io/ignore', 'configmap/Bad_Name', 'has "configmap/Bad_Name"'],
    ['config-sync.io/ignore', 'configmap/a/b', 'has "configmap/a/b"'],
    ['config-sync.io/secret-env', 'skip', 'is not restart or ignore'],
    ['config-sync.io/grace', 'abc', 'is not a duration'],
    ['config-sync.io/grace', '48h', 'is out of range; write 0s to 24h'],
    ['config-sync.io/on-drift', 'restrat', 'is not restart, alert-only or reload'],
    ['config-sync.io/ingore', 'volume/cache', 'is not an annotation config-sync reads'],
    ['config-sync.io/restart', 'never', 'it belongs on the ConfigMap or Secret, not on the Pod template'],
  ])('%s=%s is a problem that names the value and the fix', (name, value, why) => {
    const said = parsePodAnnotations({ [name]: value }, 'sidecar');
    expect(said.problems).toHaveLength(1);
    expect(said.problems[0]).toContain(`${name}="${value}"`);
    expect(said.problems[0]).toContain(why);
  });

  it('keeps the annotations config-sync writes, and everything outside its prefix, out of it', () => {
    const said = parsePodAnnotations(
      {
        'config-sync.io/config-hash': 'abc',
        'config-sync.io/start-baselines': '{}',
        'kubectl.kubernetes.io/restartedAt': 'x',
        'example.com/ignore': 'anything',
      },
      'sidecar',
    );
    expect(said.problems).toEqual([]);
  });

  it('reads grace and on-drift, with a line for each', () => {
    const said = parsePodAnnotations(
      { 'config-sync.io/grace': '2m', 'config-sync.io/on-drift': 'alert-only' },
      'node',
    );
    expect(said).toMatchObject({ graceMs: 120_000, mode: 'alert-only' });
    expect(said.lines).toEqual([
      'grace 2m, from config-sync.io/grace',
      'on-drift alert-only, from config-sync.io/on-drift',
    ]);
  });

  it('takes reload with its trigger in the sidecar, and refuses it in the node agent', () => {
    const annotations = {
      'config-sync.io/on-drift': 'reload',
      'config-sync.io/reload-url': 'http://127.0.0.1:9090/-/reload',
    };
    expect(parsePodAnnotations(annotations, 'sidecar')).toMatchObject({
      mode: 'reload',
      trigger: { kind: 'http', url: 'http://127.0.0.1:9090/-/reload' },
      problems: [],
    });
    const node = parsePodAnnotations(annotations, 'node');
    expect(node.mode).toBeUndefined();
    expect(node.problems[0]).toContain('is not available to the node agent');
    expect(node.trigger).toBeUndefined();
    expect(node.lines.some((l) => l.startsWith('reload trigger from'))).toBe(false);
  });

  it.each([
    [{ 'config-sync.io/reload-url': 'ftp://x' }, 'config-sync.io/reload-url ftp://x is not an http(s) URL'],
    [
      { 'config-sync.io/reload-url': 'http://127.0.0.1/', 'config-sync.io/reload-signal': 'SIGHUP' },
      'config-sync.io/reload-url and config-sync.io/reload-signal are both set',
    ],
    [
      { 'config-sync.io/reload-signal': 'SIGHUP' },
      'config-sync.io/reload-signal needs config-sync.io/reload-process',
    ],
    [
      { 'config-sync.io/reload-signal': 'SIGNOPE', 'config-sync.io/reload-process': 'app' },
      'is not a signal',
    ],
  ])('a reload trigger that cannot work is a problem: %o', (extra, why) => {
    const said = parsePodAnnotations({ 'config-sync.io/on-drift': 'reload', ...extra }, 'sidecar');
    expect(said.problems.join('\n')).toContain(why);
  });

  it('says that reload-* annotations outside reload mode do nothing', () => {
    const said = parsePodAnnotations({ 'config-sync.io/reload-url': 'http://127.0.0.1/' }, 'sidecar');
    expect(said.problems).toEqual([]);
    expect(said.lines).toEqual([
      'reload trigger from the config-sync.io/reload-* annotations (in reload mode)',
    ]);
    expect(said.trigger).toEqual({ kind: 'http', url: 'http://127.0.0.1/' });
    const node = parsePodAnnotations({ 'config-sync.io/reload-url': 'http://127.0.0.1/' }, 'node');
    expect(node.trigger).toBeUndefined();
    expect(node.lines).toEqual([
      'the config-sync.io/reload-* annotations are read only in reload mode (config-sync.io/on-drift=reload, which the node agent does not have)',
    ]);
    const stray = parsePodAnnotations(
      { 'config-sync.io/on-drift': 'restart', 'config-sync.io/reload-url': 'http://127.0.0.1/' },
      'sidecar',
    );
    expect(stray.lines).toContain(
      'the config-sync.io/reload-* annotations are read only in reload mode (config-sync.io/on-drift=reload)',
    );
  });
});

describe('readPodAnnotations', () => {
  it('changes the agent configuration for this Pod only, and says where the mode came from', () => {
    const base = config('--on-drift', 'restart', '--grace', '90s');
    const pod = readPodAnnotations(
      base,
      { 'config-sync.io/on-drift': 'alert-only', 'config-sync.io/grace': '10s' },
      'sidecar',
    );
    expect(pod.config.heal).toEqual({
      mode: 'alert-only',
      minRestartIntervalMs: base.heal.minRestartIntervalMs,
      modeFrom: 'config-sync.io/on-drift=alert-only on the Pod',
    });
    expect(pod.config.verify.graceMs).toBe(10_000);
    expect(pod.config.verify.debounceMs).toBe(base.verify.debounceMs);
    expect(base.heal.mode).toBe('restart');
    expect(base.verify.graceMs).toBe(90_000);
  });

  it('turns reload mode on with the annotation trigger, the fallback and settle from the flags', () => {
    const base = config('--reload-fallback', 'alert-only', '--reload-settle', '3s');
    const pod = readPodAnnotations(
      base,
      { 'config-sync.io/on-drift': 'reload', 'config-sync.io/reload-url': 'http://127.0.0.1:8080/reload' },
      'sidecar',
    );
    expect(pod.config.reload).toEqual({
      trigger: { kind: 'http', url: 'http://127.0.0.1:8080/reload' },
      settleMs: 3000,
    });
    expect(pod.config.heal.mode).toBe('alert-only');
    expect(pod.config.heal.modeFrom).toBe(
      '--reload-fallback alert-only, in reload mode from config-sync.io/on-drift=reload on the Pod',
    );
  });

  it("turns reload mode on with the flags' trigger when the annotation gives none", () => {
    const base = config('--on-drift', 'reload', '--reload-url', 'http://127.0.0.1:1/r');
    const pod = readPodAnnotations(base, { 'config-sync.io/on-drift': 'reload' }, 'sidecar');
    expect(pod.problems).toEqual([]);
    expect(pod.config.reload?.trigger).toEqual({ kind: 'http', url: 'http://127.0.0.1:1/r' });
    const other = readPodAnnotations(
      base,
      { 'config-sync.io/reload-url': 'http://127.0.0.1:2/r' },
      'sidecar',
    );
    expect(other.config.reload?.trigger).toEqual({ kind: 'http', url: 'http://127.0.0.1:2/r' });
  });

  it('asks for a trigger where neither the annotations nor the flags give one', () => {
    const pod = readPodAnnotations(config(), { 'config-sync.io/on-drift': 'reload' }, 'sidecar');
    expect(pod.problems).toEqual([
      'config-sync.io/on-drift="reload" has no way to tell the app; set config-sync.io/reload-url, or config-sync.io/reload-signal with config-sync.io/reload-process',
    ]);
    expect(pod.config.heal.mode).toBe('alert-only');
    expect(pod.config.reload).toBeUndefined();
  });

  it("gives way to check's and heal's own --grace and --on-drift on the command line, not to the agent's", () => {
    const annotations = { 'config-sync.io/grace': '10s', 'config-sync.io/on-drift': 'alert-only' };
    const settings = resolveSettings('heal', agentSettings, ['--grace', '0s', '--on-drift', 'restart'], {});
    const heal = readPodAnnotations(agentConfig('heal', settings), annotations, 'sidecar');
    expect(heal.config.verify.graceMs).toBe(0);
    expect(heal.config.heal.mode).toBe('restart');
    expect(heal.lines).toEqual([
      'config-sync.io/grace is set, and --grace on the command line wins over it',
      'config-sync.io/on-drift is set, and --on-drift on the command line wins over it',
    ]);
    const agent = readPodAnnotations(
      config('--grace', '0s', '--on-drift', 'restart'),
      annotations,
      'sidecar',
    );
    expect(agent.config.verify.graceMs).toBe(10_000);
    expect(agent.config.heal.mode).toBe('alert-only');
  });

  it('never restarts a Pod whose annotations cannot be read, whatever else they say, and says why', () => {
    const base = config('--on-drift', 'restart');
    const pod = readPodAnnotations(
      base,
      { 'config-sync.io/on-drift': 'restart', 'config-sync.io/grace': 'soon' },
      'node',
    );
    expect(pod.config.heal.mode).toBe('alert-only');
    expect(pod.config.heal.modeFrom).toContain('config-sync.io/grace="soon" is not a duration');
    expect(pod.config.heal.modeFrom).toContain('never restarted');
    expect(pod.config.verify.graceMs).toBe(base.verify.graceMs);
  });
});
