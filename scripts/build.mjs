// Bundles the CLI into one ESM file, dist/config-sync.js.
//
// Why bundle: the agent runs in every pod, and resident memory is what users of a per-pod sidecar
// watch most. Measured for this project (issue 4's notes, Node 24): the chosen libraries imported
// as plain ESM from node_modules cost 127 MiB RSS and 0.55 s to load; bundled and minified by
// esbuild, 77 MiB and 0.17 s. esbuild is a devDependency only; nothing of it ships.
import { build } from 'esbuild';

// @kubernetes/client-node re-exports every API group from its index and does not declare itself
// free of side effects, so esbuild keeps all of them, although config-sync uses five. Its modules
// only define classes and functions, so this plugin declares the package's own files side-effect
// free and esbuild drops what nothing uses. The integration tests run every client the CLI uses.
const CLIENT_NODE = '/node_modules/@kubernetes/client-node/';
const clientNodeTreeShaking = {
  name: 'client-node-tree-shaking',
  setup(b) {
    b.onResolve({ filter: /.*/ }, async (args) => {
      if (args.pluginData === 'resolved-by-plugin') return undefined;
      if (args.path !== '@kubernetes/client-node' && !args.importer.includes(CLIENT_NODE)) return undefined;
      const r = await b.resolve(args.path, {
        kind: args.kind,
        resolveDir: args.resolveDir,
        importer: args.importer,
        pluginData: 'resolved-by-plugin',
      });
      if (r.errors.length > 0 || !r.path.includes(CLIENT_NODE))
        return r.errors.length > 0 ? { errors: r.errors } : undefined;
      return { path: r.path, namespace: r.namespace, sideEffects: false };
    });
  },
};

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
  plugins: [clientNodeTreeShaking],
});
