import net from 'node:net';

/**
 * Asks the kernel for a free TCP port on 127.0.0.1. The port is released before the caller binds
 * it, so another process could take it in between; the components are started right after and a
 * bind failure shows in their log, which the harness prints.
 */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === 'object') resolve(address.port);
        else reject(new Error('no port assigned'));
      });
    });
  });
}
