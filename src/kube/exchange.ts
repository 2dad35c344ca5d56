// One request and its answer, whichever HTTP carries it: an HTTP/1.1 request on a pooled socket,
// or a stream of the HTTP/2 session the transport keeps to the API server. request() and watch()
// in transport.ts are written once against this.
//
// What an exchange promises its user:
//  - onResponse: the answer's status and its body, a Readable (once the head has arrived);
//  - onError: the exchange failed: the connection could not be made, broke, or the answer's
//    body ended short of its end (an HTTP/2 stream reset, an HTTP/1.1 connection closed). It
//    may fire after onResponse, and more than once; the user settles once. A NotProcessedError
//    is a request the server never acted on, which is safe to send again;
//  - onSilence: nothing moved, either way, for that long;
//  - connectionAnswers: whether the connection under it still answers (an HTTP/2 ping), so a
//    silent stream is quiet rather than cut off; over HTTP/1.1 nothing but the stream itself
//    could tell, so always false;
//  - connectionLeaving: the connection under it was sent away (an HTTP/2 GOAWAY): its streams
//    may finish, but it answers no ping, and new ones go over the next connection;
//  - destroy: ends it now, with the error given (or quietly); with an error, on HTTP/2, the
//    connection under it is checked too (http2-session.ts);
//  - end: sends the request, with its body if any.
import type http from 'node:http';
import http2 from 'node:http2';
import type { Readable } from 'node:stream';

/**
 * An HTTP/2 stream the server refused before processing it (RFC 9113 8.7): a REFUSED_STREAM
 * reset, sent when the server goes away (GOAWAY: a restart, or kube-apiserver's
 * `--goaway-chance` balancing its connections) while the request was on its way, or a stream
 * opened on a session already told to go away. Any request, a PATCH too, may be sent again.
 */
export class NotProcessedError extends Error {
  readonly code = 'ERR_HTTP2_NOT_PROCESSED';
  constructor(cause: string) {
    super(`the API server did not process the request (${cause}); it may be sent again`);
    this.name = 'NotProcessedError';
  }
}

/** HTTP/2's error codes by number (RFC 9113 7), for messages. */
const H2_ERROR_NAMES: Readonly<Record<number, string>> = {
  0: 'NO_ERROR',
  1: 'PROTOCOL_ERROR',
  2: 'INTERNAL_ERROR',
  3: 'FLOW_CONTROL_ERROR',
  4: 'SETTINGS_TIMEOUT',
  5: 'STREAM_CLOSED',
  6: 'FRAME_SIZE_ERROR',
  7: 'REFUSED_STREAM',
  8: 'CANCEL',
  9: 'COMPRESSION_ERROR',
  10: 'CONNECT_ERROR',
  11: 'ENHANCE_YOUR_CALM',
  12: 'INADEQUATE_SECURITY',
  13: 'HTTP_1_1_REQUIRED',
};

/**
 * An HTTP/2 stream that closed before its answer's head (a RST_STREAM, any code but
 * REFUSED_STREAM): what an L7 hop in front of the API server (a proxy, a load balancer, a
 * mesh's sidecar) sends when its own connection upstream dies. The request may have been
 * processed, so the transport does not send it again by itself; it fails, at once, for the
 * caller's retry. Node reads a reset with NO_ERROR as the stream's clean end and one with
 * CANCEL as a close without an error, so without this a request reset so waited for ever.
 */
export class StreamResetError extends Error {
  readonly code = 'ERR_HTTP2_STREAM_RESET';
  readonly rstCode: number;
  constructor(rstCode: number) {
    const name = H2_ERROR_NAMES[rstCode] ?? `code ${rstCode}`;
    super(`the HTTP/2 stream was reset (${name}) before any answer came`);
    this.name = 'StreamResetError';
    this.rstCode = rstCode;
  }
}

export interface Exchange {
  onResponse(listener: (status: number, body: Readable) => void): void;
  onError(listener: (error: Error) => void): void;
  onSilence(ms: number, listener: () => void): void;
  connectionAnswers(): Promise<boolean>;
  connectionLeaving(): boolean;
  destroy(error?: Error): void;
  end(payload?: Buffer): void;
}

export function http1Exchange(request: http.ClientRequest): Exchange {
  return {
    onResponse: (listener) =>
      request.on('response', (response) => {
        // The connection closed before the answer's end.
        response.on('close', () => {
          if (!response.complete) request.emit('error', new Error('the answer was cut short'));
        });
        listener(response.statusCode ?? 0, response);
      }),
    onError: (listener) => request.on('error', listener),
    onSilence: (ms, listener) => request.setTimeout(ms, listener),
    connectionAnswers: () => Promise.resolve(false),
    connectionLeaving: () => false,
    destroy: (error) => request.destroy(error),
    end: (payload) => request.end(payload),
  };
}

/**
 * `release` is called once, when the stream has closed (the session counts its open streams);
 * `probe` pings the session: when the stream's user gives up on it (no answer in time), which
 * may be the whole connection's fault, and when it asks whether the connection still answers;
 * `leaving` says whether the session was sent away.
 */
export function http2Exchange(
  stream: http2.ClientHttp2Stream,
  release: () => void,
  probe: () => Promise<boolean>,
  leaving: () => boolean,
): Exchange {
  let ended = false;
  let destroyed = false;
  const errorListeners: ((error: Error) => void)[] = [];
  const fail = (error: Error) => {
    for (const listener of errorListeners) listener(error);
  };
  stream.on('end', () => {
    ended = true;
  });
  let answered = false;
  stream.once('response', () => {
    answered = true;
  });
  const notProcessed = (error?: NodeJS.ErrnoException): NotProcessedError | undefined => {
    if (answered) return undefined;
    if (stream.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM)
      return new NotProcessedError('REFUSED_STREAM');
    if (error?.code === 'ERR_HTTP2_GOAWAY_SESSION')
      return new NotProcessedError('the session was going away');
    return undefined;
  };
  // A reset before the answer's head, whatever its code, is a StreamResetError (Node makes an
  // error of some codes only); one after it, the stream's own error.
  const resetBeforeHead = () =>
    answered || stream.rstCode === undefined ? undefined : new StreamResetError(stream.rstCode);
  stream.on('error', (error: NodeJS.ErrnoException) =>
    fail(
      notProcessed(error) ??
        (error.code === 'ERR_HTTP2_STREAM_ERROR' ? resetBeforeHead() : undefined) ??
        error,
    ),
  );
  // A stream closed with no answer, or before its body's end, and no error of its own (a reset
  // by the server or a hop in front of it, a session that went away): the exchange failed, and
  // a watch must not take that for the server's clean end. A reset with NO_ERROR reads as the
  // body's end in Node even when no answer came, so `ended` alone does not say it was answered.
  stream.on('close', () => {
    release();
    if (destroyed || (answered && ended)) return;
    fail(
      notProcessed() ??
        resetBeforeHead() ??
        new Error(`the HTTP/2 stream closed before its end (code ${stream.rstCode})`),
    );
  });
  return {
    onResponse: (listener) =>
      stream.on('response', (headers) => listener(Number(headers[':status'] ?? 0), stream)),
    onError: (listener) => errorListeners.push(listener),
    onSilence: (ms, listener) => stream.setTimeout(ms, listener),
    connectionAnswers: probe,
    connectionLeaving: leaving,
    destroy: (error) => {
      destroyed = true;
      // A stream destroyed with an error says so once through 'error'; one destroyed quietly
      // says nothing, which is what the user asked for. Stopping (ECANCELED) blames nothing.
      stream.destroy(error);
      if (error && (error as { code?: unknown }).code !== 'ECANCELED') void probe();
    },
    end: (payload) => stream.end(payload),
  };
}

/**
 * An exchange whose carrier is still being made (an HTTP/2 session's TLS handshake): what the
 * user asks of it is held and done once `carrier` resolves; a carrier that fails fails the
 * exchange; one destroyed before it came is destroyed when it comes.
 */
export function pendingExchange(carrier: Promise<Exchange>): Exchange {
  const held: ((exchange: Exchange) => void)[] = [];
  const errorListeners: ((error: Error) => void)[] = [];
  let ready: Exchange | undefined;
  let destroyed: { error?: Error | undefined } | undefined;
  carrier.then(
    (exchange) => {
      ready = exchange;
      for (const listener of errorListeners) exchange.onError(listener);
      if (destroyed) {
        exchange.destroy(destroyed.error);
        return;
      }
      for (const apply of held) apply(exchange);
    },
    (error: Error) => {
      if (destroyed) return;
      for (const listener of errorListeners) listener(error);
    },
  );
  const when = (apply: (exchange: Exchange) => void) => (ready ? apply(ready) : held.push(apply));
  return {
    onResponse: (listener) => when((e) => e.onResponse(listener)),
    onError: (listener) => (ready ? ready.onError(listener) : errorListeners.push(listener)),
    onSilence: (ms, listener) => when((e) => e.onSilence(ms, listener)),
    connectionAnswers: () => (ready ? ready.connectionAnswers() : Promise.resolve(false)),
    connectionLeaving: () => ready?.connectionLeaving() ?? false,
    destroy: (error) => {
      if (ready) {
        ready.destroy(error);
        return;
      }
      destroyed = { error };
      if (error) for (const listener of errorListeners) listener(error);
    },
    end: (payload) => when((e) => e.end(payload)),
  };
}
