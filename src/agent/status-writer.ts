// Writes a Pod's InSync condition and last-config-sync after a pass, when status/condition.ts
// says a write is due (a transition, a match of new versions, the heartbeat), and remembers
// what it wrote. A write that failed leaves the condition saying what the last write said (a
// readiness gate acts on it), so it is tried again after a backoff (retry.ts), not at the next
// --resync: the pass is run again then, and writes whatever is due by that time.
import type { Logger } from 'pino';
import type { KubeClient } from '../kube/client.ts';
import type { SourceRef } from '../kube/resources.ts';
import { statusToWrite, type WrittenStatus } from '../status/condition.ts';
import { writePodStatus } from '../status/pod-status.ts';
import type { SourceLookup } from '../verify/expected.ts';
import { refKey } from '../verify/source.ts';
import type { Verdict } from '../verify/verdict.ts';
import { Backoff } from './retry.ts';

export interface StatusWriterDeps {
  readonly client: Pick<KubeClient, 'patch'>;
  readonly namespace: string;
  /** The Pod written; none, and nothing is written. */
  readonly pod: string | undefined;
  readonly heartbeatMs: number;
  readonly log: Logger;
  readonly clock: () => number;
}

/** `Kind/name@resourceVersion,...` of the sources present in the view: what a match was made on. */
export function matchedVersions(sources: readonly SourceRef[], lookup: SourceLookup): string {
  return sources
    .map((ref) => {
      const s = lookup(ref);
      return s?.state === 'present' ? `${refKey(ref)}@${s.snapshot.resourceVersion}` : undefined;
    })
    .filter(Boolean)
    .join(',');
}

export class StatusWriter {
  private written: WrittenStatus | undefined;
  private readonly backoff = new Backoff();
  private retryAt: number | undefined;
  private readonly deps: StatusWriterDeps;

  constructor(deps: StatusWriterDeps) {
    this.deps = deps;
  }

  /**
   * Writes what the pass's verdicts call for, if anything is due. `note`: why nothing was done
   * about a drift (heal/report.ts, conditionNote), for the condition's message.
   */
  async write(verdicts: readonly Verdict[], versions: string, now: number, note?: string): Promise<void> {
    this.retryAt = undefined;
    const { pod, log } = this.deps;
    if (!pod) return;
    const due = statusToWrite(verdicts, versions, this.written, now, this.deps.heartbeatMs, note);
    if (!due) return;
    try {
      await writePodStatus(this.deps.client as KubeClient, this.deps.namespace, pod, due.update);
      this.written = due.written;
      this.backoff.succeeded();
    } catch (error) {
      const { delayMs, retryInSeconds } = this.backoff.failed();
      this.retryAt = this.deps.clock() + delayMs;
      log.warn(
        {
          code: (error as { code?: string }).code,
          hint: (error as { hint?: string }).hint,
          retryInSeconds,
        },
        (error as Error).message,
      );
    }
  }

  /** When to write again after a failed write, if the last one failed. */
  deadline(): number | undefined {
    return this.retryAt;
  }

  /** What was last written, if anything. */
  last(): WrittenStatus | undefined {
    return this.written;
  }
}
