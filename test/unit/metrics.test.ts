// The agent's registry: the process metrics are there, computed at scrape, and nothing samples
// the event loop in the background (prom-client's 10 ms event-loop histogram cost 1 % of a core).
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/metrics/metrics.ts';
import { sample } from '../cluster/app.ts';

describe('process metrics', () => {
  it('are computed at scrape: CPU, memory, descriptors, start time, event-loop lag', async () => {
    const metrics = createMetrics();
    // Some CPU to count.
    let x = 0;
    for (let i = 0; i < 1e6; i++) x += i;
    expect(x).toBeGreaterThan(0);
    const text = await metrics.registry.metrics();
    expect(sample(text, 'config_sync_process_cpu_seconds_total')).toBeGreaterThan(0);
    // Each on the first scrape, not one scrape behind the total.
    expect(sample(text, 'config_sync_process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(sample(text, 'config_sync_process_resident_memory_bytes')).toBeGreaterThan(10 * 1024 * 1024);
    expect(sample(text, 'config_sync_process_nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
    expect(sample(text, 'config_sync_process_open_fds')).toBeGreaterThan(2);
    expect(sample(text, 'config_sync_process_start_time_seconds')).toBeLessThanOrEqual(Date.now() / 1000);
    const lag = sample(text, 'config_sync_process_nodejs_eventloop_lag_seconds') ?? -1;
    expect(lag).toBeGreaterThanOrEqual(0);
    expect(lag).toBeLessThan(1);
    // The histogram family of prom-client's default metrics is gone with its 10 ms timer.
    expect(text).not.toContain('eventloop_lag_p99');
  });

  it('the CPU counter grows between scrapes, never shrinks', async () => {
    const metrics = createMetrics();
    const first = sample(await metrics.registry.metrics(), 'config_sync_process_cpu_seconds_total') ?? 0;
    let x = 0;
    for (let i = 0; i < 5e6; i++) x += i;
    expect(x).toBeGreaterThan(0);
    const second = sample(await metrics.registry.metrics(), 'config_sync_process_cpu_seconds_total') ?? 0;
    expect(second).toBeGreaterThan(first);
  });
});
