// Bundles the CLI into ESM: dist/config-sync.js, plus the chunks it imports lazily (dist/chunks/).
//
// Why bundle: the agent runs in every pod, and resident memory is what users of a per-pod sidecar
// watch most. Measured for this project (issue 4's notes, Node 24): the chosen libraries imported
// as plain ESM from node_modules cost 127 MiB RSS and 0.55 s to load; bundled and minified by
// esbuild, 77 MiB and 0.17 s. esbuild is a devDependency only; nothing of it ships.
//
// Why chunks: client-node (its kubeconfig reader and authenticators, with undici and the rest of
// its dependencies) is needed only when config-sync runs from a kubeconfig. Its modules are
// imported with import() (src/kube/scope-facts.ts, src/kube/client.ts), so esbuild puts them in a
// chunk that the in-cluster agent never loads. dist/meta.json records which module went where;
// a unit test reads it to keep client-node out of everything the entry loads statically.
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import { build } from 'esbuild';

// Node's built-in modules are loaded with require(), not import. Why: an ESM import of a built-in
// builds its module namespace, which reads every export, and `node:http` exports WebSocket,
// MessageEvent and CloseEvent as lazy getters that load Node's own copy of undici. Measured on
// Node 24: a bare HTTP server as ESM that imports node:http holds 60 MiB; the same requiring
// it, 47 MiB. The bundle's banner provides `require`, so each built-in becomes a CommonJS module
// whose named exports esbuild reads directly.
const BUILTINS = new Set(builtinModules);
const builtinsByRequire = {
  name: 'builtins-by-require',
  setup(b) {
    b.onResolve({ filter: /^[a-z_:/]+$/ }, (args) => {
      const name = args.path.replace(/^node:/, '');
      if (!BUILTINS.has(name) && !BUILTINS.has(args.path)) return undefined;
      // The require() inside the stand-in module below is the real one: leave it to Node.
      if (args.namespace === 'builtin-by-require') return { path: args.path, external: true };
      return { path: args.path, namespace: 'builtin-by-require' };
    });
    b.onLoad({ filter: /.*/, namespace: 'builtin-by-require' }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
      loader: 'js',
    }));
  },
};

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

fs.rmSync('dist', { recursive: true, force: true });
const result = await build({
  entryPoints: { 'config-sync': 'src/cli/entry.ts' },
  outdir: 'dist',
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
  metafile: true,
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
  plugins: [builtinsByRequire, clientNodeTreeShaking],
});
fs.writeFileSync('dist/meta.json', JSON.stringify(result.metafile));
