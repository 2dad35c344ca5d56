// One control-plane process (etcd, kube-apiserver, kube-controller-manager), its log file and
// its lifetime.
//
// No orphans, however the harness ends: each binary is started through util-linux `setpriv
// --pdeathsig KILL`, so the kernel kills it when the process that started it dies, even by
// SIGKILL, where no exit handler of ours can run. A normal stop sends SIGTERM and waits for the
// process to exit, with SIGKILL after a grace period.
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';

export interface ComponentSpec {
  readonly name: string;
  readonly binary: string;
  readonly args: readonly string[];
  readonly logFile: string;
  /** Added to the minimal environment (PATH, HOME); a PATH here replaces the default one. */
  readonly env?: Readonly<Record<string, string>>;
}

export class Component {
  readonly spec: ComponentSpec;
  readonly name: string;
  readonly logFile: string;
  readonly pid: number;
  private readonly child: ChildProcess;
  private exit: { code: number | null; signal: NodeJS.Signals | null; error?: string } | undefined;
  private readonly exited: Promise<void>;

  private constructor(spec: ComponentSpec, child: ChildProcess) {
    this.spec = spec;
    this.name = spec.name;
    this.logFile = spec.logFile;
    this.child = child;
    if (child.pid === undefined) throw new Error(`${spec.name}: process did not start`);
    this.pid = child.pid;
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exit = { code, signal };
        resolve();
      });
    });
  }

  static start(spec: ComponentSpec): Component {
    const log = openSync(spec.logFile, 'a');
    try {
      // Components read configuration from the environment too (etcd reads every ETCD_* variable):
      // pass only what a process needs to run, so a developer's shell cannot change the cluster.
      const env = {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: process.env.HOME ?? '/tmp',
        ...spec.env,
      };
      const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', spec.binary, ...spec.args], {
        stdio: ['ignore', log, log],
        env,
      });
      const component = new Component(spec, child);
      // A spawn failure (no setpriv, say) surfaces through exitReason() to whoever is waiting.
      child.once('error', (error) => {
        component.exit = {
          code: null,
          signal: null,
          error: `could not start through setpriv: ${error.message}`,
        };
      });
      return component;
    } finally {
      closeSync(log);
    }
  }

  /** Why the process is no longer running, or undefined while it runs. */
  exitReason(): string | undefined {
    if (!this.exit) return undefined;
    if (this.exit.error) return `${this.name}: ${this.exit.error}`;
    return `${this.name} exited (code ${this.exit.code}, signal ${this.exit.signal})`;
  }

  logTail(lines = 40): string {
    try {
      const all = readFileSync(this.logFile, 'utf8').trimEnd().split('\n');
      return all.slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }

  async stop(graceMs = 10_000): Promise<void> {
    if (this.exit || this.child.exitCode !== null) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  /** For process 'exit' handlers, where nothing asynchronous runs. */
  killNow(): void {
    if (!this.exit) this.child.kill('SIGKILL');
  }
}
