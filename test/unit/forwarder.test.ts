// The real node's ClusterIP forwarder (test/cluster/forwarder.ts): stopping it ends the
// connections it carries, even one paused by backpressure, so a stopped node never holds the
// test or bench process open.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type Forwarder, forward } from '../cluster/forwarder.ts';
import { freeLoopbackPort } from '../cluster/ports.ts';
import { waitFor } from '../cluster/wait.ts';

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

/** An upstream server on loopback that answers each connection with `serve`, a forwarder to it, and a client through it. */
async function throughForwarder(
  serve: (socket: net.Socket) => void,
): Promise<{ forwarder: Forwarder; client: net.Socket }> {
  const upstream = net.createServer(serve);
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
  client.on('error', () => {});
  closers.push(() => client.destroy());
  return { forwarder, client };
}

describe('forward', () => {
  it('carries bytes both ways', async () => {
    const { client } = await throughForwarder((s) => s.pipe(s)); // echo
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
    let upstreamClosed: () => void = () => {};
    const closed = new Promise<void>((resolve) => {
      upstreamClosed = resolve;
    });
    let upstreamSocket: net.Socket | undefined;
    const { forwarder, client } = await throughForwarder((s) => {
      upstreamSocket = s;
      const write = () => {
        while (s.write(chunk));
      };
      s.on('drain', write);
      s.on('close', () => upstreamClosed());
      s.on('error', () => {});
      write();
    });
    client.pause();
    // Every buffer on the way full and the pipe paused: upstream has bytes waiting that nothing
    // takes, and has written no more since the last look.
    let written = -1;
    await waitFor(
      () => {
        const s = upstreamSocket;
        if (!s || s.writableLength === 0 || s.bytesWritten !== written) {
          written = s?.bytesWritten ?? -1;
          return undefined;
        }
        return true;
      },
      { what: 'the forwarded connection paused by backpressure', timeoutMs: 5000, intervalMs: 50 },
    );
    forwarder.close();
    await expect(closed).resolves.toBeUndefined();
  });
});
