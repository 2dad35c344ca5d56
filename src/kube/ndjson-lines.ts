// Splits a stream of newline-delimited JSON (the API's watch) into lines, chunk by chunk.
//
// Why not `pending += chunk` and `indexOf('\n')` on the text so far: an event arrives in many
// chunks (a 1 MiB ConfigMap in about 60 of 16 KiB), and each search flattened the whole event
// so far into a new string. That made one event cost the square of its size: about 30 MiB of
// short-lived large strings for a 1 MiB ConfigMap, which the heap kept for good after a few
// updates (docs/benchmarks.md). Here each character is searched once and copied once.
//
// Step by step, for each chunk (text: the response is decoded as UTF-8 by node's own decoder,
// which holds back a character cut between chunks until it is whole):
//  (1) search the chunk alone for a newline, from where the last line in it ended;
//  (2) none: keep the rest of the chunk for the line in progress;
//  (3) one: the line is the kept pieces and the chunk up to the newline, joined once.
// Blank lines (only whitespace) are not handed on.
// Text rather than bytes: joining bytes took a native buffer the size of the event, whose
// memory the allocator kept after it was freed; strings stay on V8's heap, which gives it back.

/** A chunk consumer that calls `onLine` with each complete line. */
export function ndjsonLines(onLine: (line: string) => void): (chunk: string) => void {
  let pieces: string[] = [];
  return (chunk) => {
    let start = 0;
    for (;;) {
      // (1)
      const nl = chunk.indexOf('\n', start);
      if (nl < 0) {
        // (2)
        if (start < chunk.length) pieces.push(chunk.slice(start));
        return;
      }
      // (3)
      const tail = chunk.slice(start, nl);
      const line = (pieces.length === 0 ? tail : pieces.join('') + tail).trim();
      pieces = [];
      start = nl + 1;
      if (line) onLine(line);
    }
  };
}
