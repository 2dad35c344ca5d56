// How long the agent asks the API server to keep a watch open (src/watch/api-watch.ts): as
// client-go's reflector where a quiet watch is kept (HTTP/2), below the silence limit where it
// is not (HTTP/1.1).
import { describe, expect, it } from 'vitest';
import { watchSeconds } from '../../src/watch/api-watch.ts';

describe('watchSeconds', () => {
  it('spreads watches kept quiet over 5 to 10 minutes', () => {
    expect(watchSeconds(true, () => 0)).toBe(300);
    expect(watchSeconds(true, () => 0.5)).toBe(450);
    expect(watchSeconds(true, () => 0.9999)).toBe(600);
  });

  it('asks for 60 s where only the server end tells a quiet watch from a dead one', () => {
    expect(watchSeconds(false, () => 0.5)).toBe(60);
  });
});
