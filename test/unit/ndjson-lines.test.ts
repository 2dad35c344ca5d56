// The watch stream's line splitter: every line whole and once, however the bytes are cut.
import { StringDecoder } from 'node:string_decoder';
import { describe, expect, it } from 'vitest';
import { ndjsonLines } from '../../src/kube/ndjson-lines.ts';

/**
 * Feeds `text` cut at `cuts` (byte offsets), decoded as the transport's response decodes it
 * (`setEncoding('utf8')`, node's StringDecoder), and returns the lines handed on.
 */
function split(text: string, cuts: number[]): string[] {
  const lines: string[] = [];
  const feed = ndjsonLines((line) => lines.push(line));
  const decoder = new StringDecoder('utf8');
  const bytes = Buffer.from(text, 'utf8');
  let from = 0;
  for (const at of [...cuts, bytes.length]) {
    feed(decoder.write(bytes.subarray(from, at)));
    from = at;
  }
  return lines;
}

describe('ndjsonLines', () => {
  const events = [
    '{"type":"ADDED","object":{"data":{"a":"1"}}}',
    '{"type":"MODIFIED","object":{"data":{"a":"été ✓ 𝄞"}}}',
    '{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}}',
  ];
  const text = `${events.join('\n')}\n`;

  it('hands on each line once, wherever the chunks are cut (inside a multi-byte character too)', () => {
    const length = Buffer.byteLength(text);
    for (let a = 0; a <= length; a += 1) {
      for (const b of [a, a + 1, a + 3, a + 17]) {
        if (b > length) continue;
        expect(split(text, a === b ? [a] : [a, b])).toEqual(events);
      }
    }
  });

  it('hands on a line only when its newline has come', () => {
    const lines: string[] = [];
    const feed = ndjsonLines((line) => lines.push(line));
    feed('{"type":"ADDED"');
    feed(',"object":{}}');
    expect(lines).toEqual([]);
    feed('\n{"type"');
    expect(lines).toEqual(['{"type":"ADDED","object":{}}']);
  });

  it('joins a long line from many chunks', () => {
    const value = 'x'.repeat(1 << 20);
    const line = JSON.stringify({ type: 'MODIFIED', object: { data: { big: value } } });
    const cuts = Array.from({ length: 64 }, (_, i) => (i + 1) * 16_384).filter((c) => c < line.length);
    expect(split(`${line}\n`, cuts)).toEqual([line]);
  });

  it('skips blank lines and trims the line ends the API may send', () => {
    expect(split('\n  \n{"a":1}\r\n\n{"b":2}\n', [3, 9])).toEqual(['{"a":1}', '{"b":2}']);
  });
});
