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
// node:util defines most of its exports as lazy data properties, which load their module the
// first time anything asks about the property, even Object.getOwnPropertyDescriptor. esbuild's
// interop for an ESM import of a CommonJS module (__toESM) copies every own property and asks
// each one's descriptor, so a bundle importing parseArgs from node:util loaded util's diff, its
// SIGINT tracer and with it worker_threads: 14 modules, about 1.3 MiB resident (measured on a
// bare Node HTTP server, Node 24; test/integration/footprint.test.ts keeps them out). Handed over
// as an object whose prototype is node:util, it has no own properties to copy: the interop's
// object inherits from node:util too, and each name is read only where it is used. Only
// plain-object modules may go here: a module that is itself a function or class (events,
// stream, assert) would stop being callable.
const BEHIND_A_PROTOTYPE = new Set(['util']);
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
      contents: BEHIND_A_PROTOTYPE.has(args.path.replace(/^node:/, ''))
        ? `module.exports = Object.create(require(${JSON.stringify(args.path)}));`
        : `module.exports = require(${JSON.stringify(args.path)});`,
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

// pino loads Node's worker_threads module and thread-stream at its start, for what only a pino
// transport (a worker thread) uses. config-sync logs to a stream of its own (src/log.ts) and sets
// no transport, so that code never runs, yet the modules would stay resident in every Pod (a bare
// Node HTTP server, the bench's baseline, loads neither). These edits move each of those
// require() calls to where its value is used, so Node loads the module only if that code runs;
// behaviour is otherwise unchanged. Each edit names the exact text it replaces, and the build
// fails if a dependency update changed it. An integration test
// (test/integration/footprint.test.ts) runs the agent and fails if worker_threads is loaded.
// (sonic-boom's require('assert') was deferred the same way until the transport spoke HTTP/2:
// node:http2 loads assert itself, so deferring it saved nothing.)
const LAZY_REQUIRES = {
  'node_modules/pino/lib/tools.js': [
    ["const { isMainThread } = require('worker_threads')", ''],
    ['if (!opts.sync && isMainThread) {', "if (!opts.sync && require('worker_threads').isMainThread) {"],
  ],
  'node_modules/pino/lib/transport.js': [
    ["const ThreadStream = require('thread-stream')", ''],
    ['const stream = new ThreadStream({', "const stream = new (require('thread-stream'))({"],
  ],
};
/** The LAZY_REQUIRES files this build edited (checked after it: every entry must have been). */
const edited = new Set();
const lazyRequires = {
  name: 'lazy-requires',
  setup(b) {
    // The filter is made from LAZY_REQUIRES's own keys, so an entry added there cannot be
    // skipped silently by a filter that does not name it.
    const files = Object.keys(LAZY_REQUIRES);
    const escaped = files.map((f) => f.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'));
    b.onLoad({ filter: new RegExp(`/(${escaped.join('|')})$`) }, (args) => {
      const file = files.find((f) => args.path.endsWith(`/${f}`));
      if (!file) return undefined;
      let contents = fs.readFileSync(args.path, 'utf8');
      for (const [from, to] of LAZY_REQUIRES[file]) {
        if (contents.split(from).length !== 2)
          throw new Error(
            `lazy-requires: ${file} no longer holds "${from}" exactly once; update scripts/build.mjs`,
          );
        contents = contents.replace(from, to);
      }
      edited.add(file);
      return { contents, loader: 'js' };
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
  plugins: [builtinsByRequire, clientNodeTreeShaking, lazyRequires],
});
fs.writeFileSync('dist/meta.json', JSON.stringify(result.metafile));
// An entry of LAZY_REQUIRES whose file the bundle no longer holds (a dependency moved or dropped
// it) edits nothing: say so, rather than keep an edit that no longer does anything. (Told by the
// plugin's own record, not the metafile, whose paths are node_modules' real ones: a linked
// node_modules gives them another prefix.)
const unbundled = Object.keys(LAZY_REQUIRES).filter((file) => !edited.has(file));
if (unbundled.length > 0)
  throw new Error(
    `lazy-requires: the bundle no longer holds ${unbundled.join(', ')}; remove ${unbundled.length === 1 ? 'its entry' : 'their entries'} from LAZY_REQUIRES in scripts/build.mjs`,
  );
