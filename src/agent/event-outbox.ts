// The Events a Pod's reconciler sends about its Pod (Drifted, Healed, HealFailed, ...), so that
// none is lost and none is sent twice.
//
// An Event is named when it happens, as client-go's recorder names them (the Pod and the time
// in nanoseconds: heal/executor.ts), and keeps its time whenever it is sent. One whose create
// failed (the API refused or did not answer) waits here and is sent again after a backoff
// (retry.ts), at the end of a pass, so that it never holds a restart back: a Healed or
// HealFailed Event is how an operator learns why a workload restarted or did not. A try whose
// answer was lost made the Event after all: the next try's 409 counts as sent. At most
// MAX_UNSENT wait; beyond that the oldest are dropped.
import type { Logger } from 'pino';
import { type EventReason, emitEvent, eventName, type PodRef } from '../heal/executor.ts';
import type { KubeClient } from '../kube/client.ts';
import { Backoff } from './retry.ts';

/** How many Events whose create failed wait to be sent again. */
export const MAX_UNSENT = 20;

/** An Event to send: named and timed when it happened, whatever time it is sent. */
interface PendingEvent {
  readonly reason: EventReason;
  readonly message: string;
  readonly type: 'Normal' | 'Warning';
  readonly at: Date;
  readonly name: string;
}

export interface EventOutboxDeps {
  readonly client: Pick<KubeClient, 'create'>;
  /** The Pod the Events are about; none, and nothing is sent (a `--watch` target with no Pod). */
  readonly pod: PodRef | undefined;
  readonly log: Logger;
  readonly clock: () => number;
}

export class EventOutbox {
  private readonly unsent: PendingEvent[] = [];
  private readonly backoff = new Backoff();
  private retryAt: number | undefined;
  private readonly deps: EventOutboxDeps;

  constructor(deps: EventOutboxDeps) {
    this.deps = deps;
  }

  /** Sends an Event that happens now; one that fails waits to be sent again. */
  async emit(reason: EventReason, message: string, type: 'Normal' | 'Warning'): Promise<void> {
    const pod = this.deps.pod;
    if (!pod) return;
    const at = new Date(this.deps.clock());
    await this.send({ reason, message, type, at, name: eventName(pod.name, at) });
  }

  /** The Events that failed, oldest first, once their backoff is over; stops at the first failure. */
  async sendUnsent(now: number): Promise<void> {
    if (this.unsent.length === 0 || (this.retryAt !== undefined && now < this.retryAt)) return;
    for (const e of [...this.unsent]) {
      if (!(await this.send(e))) return;
      // Sent; it may have been dropped meanwhile, when other Events failed past the limit.
      const at = this.unsent.indexOf(e);
      if (at >= 0) this.unsent.splice(at, 1);
    }
  }

  /** When the Events waiting should be sent again, if any wait. */
  deadline(): number | undefined {
    return this.unsent.length > 0 ? this.retryAt : undefined;
  }

  /** How many Events wait to be sent again. */
  waiting(): number {
    return this.unsent.length;
  }

  private async send(e: PendingEvent): Promise<boolean> {
    const pod = this.deps.pod;
    if (!pod) return true;
    try {
      await emitEvent(this.deps.client as KubeClient, pod, e.reason, e.message, e.type, e.at, e.name);
      this.backoff.succeeded();
      return true;
    } catch (error) {
      const { delayMs, retryInSeconds } = this.backoff.failed();
      this.retryAt = this.deps.clock() + delayMs;
      if (!this.unsent.includes(e)) {
        this.unsent.push(e);
        if (this.unsent.length > MAX_UNSENT) this.unsent.shift();
      }
      this.deps.log.warn(
        {
          err: { code: (error as { code?: string }).code, message: (error as Error).message },
          event: e.reason,
          retryInSeconds,
        },
        'could not emit Event: sending it again',
      );
      return false;
    }
  }
}
