// Bundles the CLI into one ESM file, dist/config-sync.js.
//
// Why bundle: the agent runs in every pod, and resident memory is what users of a per-pod sidecar
// watch most. Measured for this project (issue 4's notes, Node 24): the chosen libraries imported
// as plain ESM from node_modules cost 127 MiB RSS and 0.55 s to load; bundled and minified by
// esbuild, 77 MiB and 0.17 s. esbuild is a devDependency only; nothing of it ships.
import { build } from 'esbuild';

await build({
  entryPoints: ['src/cli/entry.ts'],
  outfile: 'dist/config-sync.js',
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  minify: true,
  sourcemap: 'linked',
  legalComments: 'linked',
  // Some dependencies are CommonJS and call require(); give the ESM bundle one.
  banner: {
    js: "import { createRequire as __csCreateRequire } from 'node:module'; const require = __csCreateRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
