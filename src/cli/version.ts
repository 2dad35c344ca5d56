// What `config-sync version` reports. The package version is read from package.json at build
// time (esbuild inlines the import), so the bundle and the source tree report the same thing.
import pkg from '../../package.json' with { type: 'json' };

export interface VersionInfo {
  readonly name: string;
  readonly version: string;
  readonly node: string;
  readonly platform: string;
}

export function versionInfo(): VersionInfo {
  return {
    name: 'config-sync',
    version: pkg.version,
    node: process.version,
    platform: `${process.platform}/${process.arch}`,
  };
}

export function formatVersion(info: VersionInfo): string {
  return `${info.name} ${info.version} (node ${info.node}, ${info.platform})`;
}
