// The harness's wait: a timeout's message says what was waited for, the last error, and the
// state things were left in, so a failure in CI can be read without running it again.
import { describe, expect, it } from 'vitest';
import { waitFor } from '../cluster/wait.ts';

describe('waitFor', () => {
  it('returns the first value the attempt gives', async () => {
    let n = 0;
    await expect(waitFor(() => (++n >= 3 ? n : undefined), { what: 'three', intervalMs: 1 })).resolves.toBe(
      3,
    );
  });

  it('adds what onTimeout says to the timeout’s message', async () => {
    const wait = waitFor(
      () => {
        throw new Error('not yet');
      },
      { what: 'the agent', timeoutMs: 20, intervalMs: 5, onTimeout: async () => 'last log: Propagating' },
    );
    await expect(wait).rejects.toThrow(
      /^timed out after 20 ms waiting for the agent \(last error: not yet\)\nlast log: Propagating$/,
    );
  });

  it('says so when onTimeout fails, and still times out with the wait’s own message', async () => {
    const wait = waitFor(() => undefined, {
      what: 'the agent',
      timeoutMs: 20,
      intervalMs: 5,
      onTimeout: () => {
        throw new Error('kubectl logs: pod gone');
      },
    });
    await expect(wait).rejects.toThrow(
      'timed out after 20 ms waiting for the agent\n(and the state at the timeout could not be read: kubectl logs: pod gone)',
    );
  });
});
