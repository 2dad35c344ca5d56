import type { CoreV1Api } from '@kubernetes/client-node';

/**
 * The example's ConfigMap with keys added up to `keys` in all (`key-000.yaml` ..., short values),
 * written to the API; `example` is its data as it was, `setData` replaces its data.
 */
export async function widenExampleConfig(
  core: CoreV1Api,
  namespace: string,
  keys: number,
): Promise<{
  example: Record<string, string>;
  data: Record<string, string>;
  setData: (d: Record<string, string>) => Promise<unknown>;
}> {
  const example = (await core.readNamespacedConfigMap({ name: 'web-config', namespace })).data ?? {};
  const data: Record<string, string> = { ...example };
  for (let i = 0; Object.keys(data).length < keys; i += 1)
    data[`key-${String(i).padStart(3, '0')}.yaml`] = `value ${i}\n`;
  const setData = (d: Record<string, string>) =>
    core.replaceNamespacedConfigMap({
      name: 'web-config',
      namespace,
      body: { metadata: { name: 'web-config' }, data: d },
    });
  await setData(data);
  return { example, data, setData };
}
