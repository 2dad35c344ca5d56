// The app of the reload rows (reload mode): an HTTP server in a process of its own, as an app in
// a Pod is, so that the moment a reload POST arrives is not held up by whatever the bench process
// is doing then (it also plays kubelet, whose clean-up of the old payload directory follows each
// swap). Each request's arrival is stamped on the monotonic clock (process.hrtime, the clock
// performance.now() counts from in every process, and in every container of a node: containerd
// gives a container no time namespace) and reported on stdout as one JSON line:
// {"url":"/agent","atNs":"123...","seenNs":"122..."}, seenNs being the request's x-seen-ns header
// (the raw reloader's moment of the swap), if any. The first line gives the port: {"port":12345}.
// On the real node the bench reads the lines from `GET /stamps` (a JSON array) instead.
// Usage: node reload-app.mjs [host] [port] (default 127.0.0.1, any free port)
import http from 'node:http';

const [host = '127.0.0.1', port = '0'] = process.argv.slice(2);
const stamps = [];
const server = http.createServer((req, res) => {
  const atNs = process.hrtime.bigint();
  if (req.method === 'GET' && req.url === '/stamps') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(stamps));
    return;
  }
  const seen = req.headers['x-seen-ns'];
  const stamp = { url: req.url, atNs: String(atNs), ...(typeof seen === 'string' ? { seenNs: seen } : {}) };
  stamps.push(stamp);
  process.stdout.write(`${JSON.stringify(stamp)}\n`);
  req.resume();
  res.end();
});
server.listen(Number(port), host, () => {
  process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);
});
