// The real node's ClusterIP forwarder (test/cluster/forwarder.ts): stopping it ends the
// connections it carries, even one paused by backpressure, so a stopped node never holds the
// test or bench process open.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { forward } from '../cluster/forwarder.ts';
import { freeLoopbackPort } from '../cluster/ports.ts';

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

describe('forward', () => {
  it('carries bytes both ways', async () => {
    const upstream = net.createServer((s) => s.pipe(s)); // echo
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    closers.push(() => upstream.close());
    const port = await freeLoopbackPort();
    const forwarder = await forward(
      '127.0.0.1',
      port,
      '127.0.0.1',
      (upstream.address() as net.AddressInfo).port,
    );
    closers.push(() => forwarder.close());
    const client = net.connect(port, '127.0.0.1');
    closers.push(() => client.destroy());
    client.write('ping');
    const echoed = await new Promise<string>((resolve) => {
      client.once('data', (d) => resolve(String(d)));
    });
    expect(echoed).toBe('ping');
  });

  it('close() ends a connection whose client stopped reading while upstream still writes', async () => {
    // Upstream writes without end, as the apiserver writes a watch; the client never reads, as
    // a Pod torn down with the node never does again: the pipe pauses upstream's side.
    const chunk = Buffer.alloc(64 * 1024, 1);
    const upstreamClosed = new Promise<void>((resolve) => {
      const upstream = net.createServer((s) => {
        const write = () => {
          while (s.write(chunk));
        };
        s.on('drain', write);
        s.on('close', () => resolve());
        s.on('error', () => {});
        write();
      });
      upstream.listen(0, '127.0.0.1');
      closers.push(() => upstream.close());
      upstream.once('listening', async () => {
        const port = await freeLoopbackPort();
        const forwarder = await forward(
          '127.0.0.1',
          port,
          '127.0.0.1',
          (upstream.address() as net.AddressInfo).port,
        );
        const client = net.connect(port, '127.0.0.1');
        client.pause();
        client.on('error', () => {});
        closers.push(() => client.destroy());
        // Long enough for both sides' buffers to fill and the pipe to pause.
        setTimeout(() => forwarder.close(), 300);
      });
    });
    await expect(upstreamClosed).resolves.toBeUndefined();
  });
});
