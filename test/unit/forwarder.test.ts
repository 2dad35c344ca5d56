// The real node's ClusterIP forwarder (test/cluster/forwarder.ts): stopping it ends the
// connections it carries, even one paused by backpressure, so a stopped node never holds the
// test or bench process open.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type Forwarder, forward } from '../cluster/forwarder.ts';
import { freeLoopbackPort } from '../cluster/ports.ts';

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
    const { forwarder, client } = await throughForwarder((s) => {
      const write = () => {
        while (s.write(chunk));
      };
      s.on('drain', write);
      s.on('close', () => upstreamClosed());
      s.on('error', () => {});
      write();
    });
    client.pause();
    // Long enough for both sides' buffers to fill and the pipe to pause.
    await new Promise((resolve) => setTimeout(resolve, 300));
    forwarder.close();
    await expect(closed).resolves.toBeUndefined();
  });
});
