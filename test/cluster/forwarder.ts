// A TCP forwarder: the real node's ClusterIP:443 -> the apiserver, bound on the node's bridge
// (there is no kube-proxy).
import net from 'node:net';

/**
 * A forwarder: close() stops it and ends every connection it carries; stall() is a partition
 * that drops packets (nothing passes either way on the connections it carries, nothing is
 * closed, new connections wait unanswered) until resume().
 */
export interface Forwarder {
  close(): void;
  stall(): void;
  resume(): void;
}

/**
 * Forwards each connection to host:port on to toHost:toPort. close() destroys the connections as
 * well as the listener: a Pod torn down with the node sends no FIN, and a connection whose Pod
 * side stopped taking data (the apiserver still writing a watch into it) is paused by the pipe's
 * backpressure, so it would not see the apiserver's end either and would hold the process open
 * until TCP gave up retransmitting (a quarter of an hour).
 */
export function forward(host: string, port: number, toHost: string, toPort: number): Promise<Forwarder> {
  const open = new Set<net.Socket>();
  const pairs = new Set<[net.Socket, net.Socket]>();
  let stalled = false;
  const held: net.Socket[] = [];
  const connect = (client: net.Socket) => {
    const upstream = net.connect(toPort, toHost);
    open.add(client).add(upstream);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    client.pipe(upstream).pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', () => {
      pairs.delete(pair);
      close();
    });
    upstream.on('close', close);
  };
  const server = net.createServer((client) => {
    if (!stalled) return connect(client);
    // A partition: the connection waits, unanswered, until resume().
    open.add(client);
    client.pause();
    client.on('error', () => client.destroy());
    held.push(client);
  });
  const forwarder = {
    close() {
      server.close();
      for (const socket of open) socket.destroy();
      open.clear();
    },
    stall() {
      stalled = true;
      for (const [client, upstream] of pairs) {
        client.unpipe();
        upstream.unpipe();
        client.pause();
        upstream.pause();
      }
    },
    resume() {
      stalled = false;
      for (const [client, upstream] of pairs) {
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
        upstream.resume();
      }
      for (const client of held.splice(0)) {
        open.delete(client);
        connect(client);
        client.resume();
      }
    },
  };
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(forwarder));
  });
}
