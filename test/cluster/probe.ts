import https from 'node:https';

export interface ProbeOptions {
  /** PEM bundle that must sign the server's certificate. */
  readonly ca: string;
  readonly token?: string;
  readonly timeoutMs?: number;
}

/** One HTTPS GET against a loopback component; resolves status and body, never retries. */
export function httpsGet(url: string, options: ProbeOptions): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {};
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    const request = https.get(url, { ca: options.ca, headers, timeout: options.timeoutMs ?? 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    request.on('timeout', () => request.destroy(new Error(`GET ${url} timed out`)));
    request.on('error', reject);
  });
}
