// Asks an OPA server whether a restart may go ahead: POST {"input": ...} to its Data API
// (`/v1/data/<path>`), read `result.allow` and `result.reason` (policy.ts). Never throws: an
// unreachable server, a timeout, a non-2xx answer or a malformed body is a `failed` outcome with
// the reason, and --policy-failure decides. On node:http(s), as the reload POST, not fetch().
import http from 'node:http';
import https from 'node:https';
import { type OpaOutcome, type PolicyInput, readOpaAnswer } from './policy.ts';

export function askOpa(
  url: string,
  input: PolicyInput,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<OpaOutcome> {
  const target = new URL(url);
  const send = target.protocol === 'https:' ? https.request : http.request;
  const body = JSON.stringify({ input });
  return new Promise((resolve) => {
    const failed = (why: string) => resolve({ type: 'failed', why });
    const request = send(
      target,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        ...(signal ? { signal } : {}),
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (c: Buffer) => chunks.push(c));
        response.on('error', (error) => failed(error.message));
        response.on('end', () => {
          const status = response.statusCode ?? 0;
          if (status < 200 || status >= 300) return failed(`it answered HTTP ${status}`);
          try {
            resolve(readOpaAnswer(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
          } catch {
            failed('the answer is not JSON');
          }
        });
      },
    );
    request.setTimeout(timeoutMs, () => request.destroy(new Error(`no answer in ${timeoutMs / 1000} s`)));
    request.on('error', (error) => failed((error as NodeJS.ErrnoException).code ?? error.message));
    request.end(body);
  });
}
