// Baseline of the reload rows (reload mode): the least a reloader can do, in bare Node, as a
// process of its own like the agent. configmap-reload's job: watch the volume directory with
// inotify (fs.watch) and POST to the reload URL on every `..data` swap, with no check of what the
// files hold. A swap is a `rename` naming `..data` (inotify's IN_MOVED_TO), as configmap-reload
// takes only fsnotify's Create of `..data`: a `change` of it is the old link's owner changed by
// an fsGroup's walk before the swap, and a POST then would reload the old files. The POST
// carries the moment it saw the swap (x-seen-ns, process.hrtime in ns), which the real node's
// row measures from. Usage: node raw-reload.mjs <directory> <url>
import fs from 'node:fs';
import http from 'node:http';

const [dir, url] = process.argv.slice(2);
const agent = new http.Agent({ keepAlive: true });
fs.watch(dir, (event, name) => {
  if (event !== 'rename' || name !== '..data') return;
  const seenNs = String(process.hrtime.bigint());
  const request = http.request(
    url,
    { method: 'POST', agent, headers: { 'content-length': '0', 'x-seen-ns': seenNs } },
    (res) => res.resume(),
  );
  request.on('error', (error) => process.stderr.write(`raw-reload: ${error.message}\n`));
  request.end();
});
process.stdout.write('watching\n');
