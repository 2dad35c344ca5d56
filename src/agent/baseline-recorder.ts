// What each app container of a Pod got at its start, for env and subPath targets, recorded on the
// Pod with that start (annotation config-sync.io/start-baselines), so that an agent started
// again still knows what the app holds (start-baselines.ts says why and how). It starts from
// what the Pod already carries, and writes only the baselines a pass found that it lacks.
import type { Logger } from 'pino';
import { ANNOTATION } from '../kube/annotations.ts';
import { annotatePod } from '../status/pod-status.ts';
import type { PassResult } from './pass.ts';
import type { Runtime } from './runtime.ts';
import { baselinesToRecord, type StartBaseline, writeStartBaselines } from './start-baselines.ts';

export interface BaselineRecorderDeps {
  readonly rt: Pick<Runtime, 'client' | 'namespace' | 'pod' | 'baselines' | 'digestKeyId'>;
  readonly log: Logger;
}

export class BaselineRecorder {
  private baselines: Record<string, StartBaseline>;
  private readonly deps: BaselineRecorderDeps;

  constructor(deps: BaselineRecorderDeps) {
    this.deps = deps;
    this.baselines = { ...deps.rt.baselines };
  }

  /** The baselines known: the Pod's, and those recorded since. */
  current(): Readonly<Record<string, StartBaseline>> {
    return this.baselines;
  }

  /**
   * Records the pass's new baselines on the Pod. They are taken as known at once: a write that
   * failed is logged, and the next start of the agent takes them again.
   */
  async record(pass: PassResult): Promise<void> {
    const { rt, log } = this.deps;
    const pod = rt.pod?.metadata?.name;
    const record = baselinesToRecord(pass.baselines, this.baselines);
    if (Object.keys(record).length === 0 || !pod) return;
    this.baselines = { ...this.baselines, ...record };
    try {
      await annotatePod(rt.client, rt.namespace, pod, {
        [ANNOTATION.startBaselines]: writeStartBaselines(this.baselines, rt.digestKeyId),
      });
      log.info({ targets: Object.keys(record) }, 'recorded start baselines');
    } catch (error) {
      log.warn({ code: (error as { code?: string }).code }, (error as Error).message);
    }
  }
}
