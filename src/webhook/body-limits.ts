// What the webhook reads of a request body before it parses any of it. Any caller that reaches
// its port can send any bytes, unauthenticated: one 4,000,000-byte body of nested `[` took it
// from 65 to 300 MB while JSON.parse built the arrays (four at once, 600 MB, against its 160Mi
// limit). So the body's size is capped before it is read whole, and its nesting before it is
// parsed; both are far above any Pod's.

/** The largest body read: an AdmissionReview of the largest Pod the API server stores (1.5 MiB) fits. */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** The deepest nesting parsed: a Pod's AdmissionReview is about 12 deep. */
export const MAX_JSON_DEPTH = 64;

/**
 * Whether JSON `text` nests arrays and objects deeper than `max`, told in one pass without
 * parsing it: brackets inside strings (and escaped quotes in them) do not count.
 */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i += 1;
      else if (c === 0x22 /* " */) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      depth += 1;
      if (depth > max) return true;
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) depth -= 1;
  }
  return false;
}
