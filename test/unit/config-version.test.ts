// The config version (`config-sync.io/config-hash`) is how replicas agree that a restart already
// happened, and how `heal` run from a laptop agrees with them: it must not depend on the
// process's locale. Under Danish collation `aa` sorts after `b` (it is the letter å), so a sort
// by localeCompare gave another order, and another version, than under English.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { byCodeUnit } from '../../src/kube/names.ts';

const expected = path.resolve(import.meta.dirname, '../../src/verify/expected.ts');
const source = path.resolve(import.meta.dirname, '../../src/verify/source.ts');

/** configVersion and configHash of two ConfigMaps, `aa` and `b`, computed in a process under `locale`. */
function versionsUnder(locale: string): string {
  const script = `
    import { configHash, configVersion } from ${JSON.stringify(expected)};
    import { snapshotConfigMap } from ${JSON.stringify(source)};
    const refs = [{ kind: 'ConfigMap', name: 'b' }, { kind: 'ConfigMap', name: 'aa' }];
    const snapshot = (name) => snapshotConfigMap({
      metadata: { name, uid: 'uid-' + name, resourceVersion: '1' },
      data: { 'b.yaml': '1', 'aa.yaml': '2', 'B.yaml': '3' },
    });
    const lookup = (ref) => ({ state: 'present', snapshot: snapshot(ref.name) });
    console.log(Intl.Collator().resolvedOptions().locale, configVersion(lookup, refs), configHash(lookup, refs));
  `;
  return execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    env: { PATH: process.env.PATH ?? '', LANG: locale, LC_ALL: locale },
    encoding: 'utf8',
  }).trim();
}

describe('the config version', () => {
  it('is the same under any locale (Danish sorts aa after b; code units do not)', () => {
    const [danishLocale, ...danish] = versionsUnder('da_DK.UTF-8').split(' ');
    const [englishLocale, ...english] = versionsUnder('en_US.UTF-8').split(' ');
    // The check means something only if the two processes really collate differently.
    expect([danishLocale, englishLocale]).toEqual(['da-DK', 'en-US']);
    expect(danish).toEqual(english);
  });

  it('orders by UTF-16 code unit', () => {
    expect(['b', 'aa', 'B', 'a-b', 'a.b'].sort(byCodeUnit)).toEqual(['B', 'a-b', 'a.b', 'aa', 'b']);
  });
});
