// A TCP forwarder: the real node's ClusterIP:443 -> the apiserver, bound on the node's bridge
// (there is no kube-proxy).
import net from 'node:net';

/** A forwarder: close() stops it and ends every connection it carries. */
export interface Forwarder {
  close(): void;
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
  const server = net.createServer((client) => {
    const upstream = net.connect(toPort, toHost);
    open.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
  });
  const forwarder = {
    close() {
      server.close();
      for (const socket of open) socket.destroy();
      open.clear();
    },
  };
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(forwarder));
  });
}
