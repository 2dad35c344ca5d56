#!/usr/bin/env node
// Launcher for the bundled CLI. The bundle targets Node.js 24; an older Node fails here with a
// clear message instead of a syntax or API error deep inside.
const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  process.stderr.write(
    `error CS_USAGE_NODE_VERSION: config-sync needs Node.js 24 or newer, this is ${process.version}\n` +
      'hint: run it through npm (npx config-sync, npm run ...) so the pinned Node 24 from devDependencies is used, or install Node.js 24\n',
  );
  process.exit(2);
}
await import('../dist/config-sync.js');
