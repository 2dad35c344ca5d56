// The app of measure 8 (reload mode): an HTTP server in a process of its own, as an app in a Pod
// is, so that the moment a reload POST arrives is not held up by whatever the bench process is
// doing then (it also plays kubelet, whose clean-up of the old payload directory follows each
// swap). Each request's arrival is stamped on the monotonic clock (process.hrtime, the clock
// performance.now() counts from in every process) and reported on stdout as one JSON line:
// {"url":"/agent","atNs":"123..."}. The first line gives the port: {"port":12345}.
import http from 'node:http';

const server = http.createServer((req, res) => {
  const atNs = process.hrtime.bigint();
  process.stdout.write(`${JSON.stringify({ url: req.url, atNs: String(atNs) })}\n`);
  req.resume();
  res.end();
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);
});
