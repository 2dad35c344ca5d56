// A kubeconfig user's exec credential plugin (client.authentication.k8s.io ExecCredential), run
// by config-sync itself rather than by client-node: client-node rejects a failed plugin with its
// whole stderr as the message and drops the exit code, so a plugin that failed silently read
// "failed: " with nothing after it. Here a failure says which plugin, its exit code and the last
// line it wrote to stderr; a plugin still running after a few seconds is reported as awaited
// (stderr), and one that hangs is stopped.
//
// Steps: (1) a cached credential that has not expired is used as is, and requests that come
// while the plugin runs wait for its one run; (2) run the command with its args, the user's env
// on top of ours, and KUBERNETES_EXEC_INFO (non-interactive, as kubectl sets it, with the
// cluster when the plugin asks for it with provideClusterInfo), stdin closed;
// (3) exit 0 and an ExecCredential on stdout with a token or a client certificate: cache it
// until its expirationTimestamp; anything else is CS_AUTH_EXEC_FAILED; (4) the API answered 401
// to the cached credential (revoked, or expired early, or a plugin that gives no expiry): drop
// it, so the next request runs the plugin again, as client-go's exec authenticator does.
// Neither stdout (it holds the credential) nor a token ever goes into an error or a log.
import { spawn } from 'node:child_process';
import { ConfigSyncError } from '../errors.ts';

export interface ExecConfig {
  readonly command: string;
  readonly args?: readonly string[] | null;
  readonly env?: readonly { readonly name: string; readonly value: string }[] | null;
  readonly apiVersion?: string;
  /** Hand the plugin the cluster it authenticates to, in KUBERNETES_EXEC_INFO's spec.cluster. */
  readonly provideClusterInfo?: boolean;
}

/**
 * The cluster as client-go hands it to a plugin that asks (client.authentication.k8s.io
 * Cluster): where the API server is and how to trust it. Never a credential.
 */
export interface ExecCluster {
  readonly server: string;
  readonly 'tls-server-name'?: string;
  readonly 'insecure-skip-tls-verify'?: boolean;
  /** The CA bundle, base64 (the PEM bytes, as Go's []byte marshals). */
  readonly 'certificate-authority-data'?: string;
  readonly 'proxy-url'?: string;
  /** The cluster's exec extension from the kubeconfig, as written (kubeconfig-raw.ts). */
  readonly config?: unknown;
}

export interface ExecCredential {
  readonly token?: string;
  readonly clientCertificateData?: string;
  readonly clientKeyData?: string;
}

/**
 * How long a plugin may run: a login prompt it cannot show would otherwise hang every request.
 * Cloud plugins (aws, gke-gcloud-auth-plugin, kubelogin with a cached token) answer in a few
 * seconds; one that needs a person is stopped and its last stderr line shown.
 */
export const PLUGIN_TIMEOUT_MS = 30_000;

/** After this long, say that config-sync is waiting for the plugin rather than stay silent. */
export const PLUGIN_WAITING_NOTICE_MS = 3_000;

export interface PluginTiming {
  readonly timeoutMs: number;
  readonly noticeAfterMs: number;
  /** Told once per run that outlasts `noticeAfterMs`: which plugin, how long so far, when it is stopped. */
  readonly onWaiting: (message: string) => void;
}

/** The CLI's and the agent's timing: the notice goes to stderr, which stdout's JSON never mixes with. */
export const DEFAULT_PLUGIN_TIMING: PluginTiming = {
  timeoutMs: PLUGIN_TIMEOUT_MS,
  noticeAfterMs: PLUGIN_WAITING_NOTICE_MS,
  onWaiting: (message) => process.stderr.write(`config-sync: ${message}\n`),
};

export interface ExecCredentials {
  /** (1)-(3) The credential to send now. */
  current(): Promise<ExecCredential>;
  /** (4) The API answered 401 to a request sent with `credential`. */
  refused(credential: ExecCredential): void;
}

export function execCredentialSource(
  exec: ExecConfig,
  user: string,
  /** Handed to a plugin that asks for it (provideClusterInfo). */
  cluster: ExecCluster | undefined,
  clock: () => number = Date.now,
  timing: PluginTiming = DEFAULT_PLUGIN_TIMING,
): ExecCredentials {
  let cached: { credential: ExecCredential; expiresAt: number } | undefined;
  let running: Promise<ExecCredential> | undefined;
  return {
    async current() {
      // (1)
      if (cached && clock() < cached.expiresAt) return cached.credential;
      running ??= runPlugin(exec, user, cluster, timing).then(
        ({ credential, expiresAt }) => {
          cached = { credential, expiresAt };
          running = undefined;
          return credential;
        },
        (error: unknown) => {
          running = undefined;
          throw error;
        },
      );
      return running;
    },
    // (4) Only the credential still cached: requests refused with an older one, answered after
    // the plugin already ran again, must not throw away its new credential.
    refused(credential) {
      if (cached?.credential === credential) cached = undefined;
    },
  };
}

function failure(exec: ExecConfig, user: string, what: string): ConfigSyncError {
  return new ConfigSyncError(
    'CS_AUTH_EXEC_FAILED',
    `the credential plugin "${exec.command}" of kubeconfig user "${user}" ${what}`,
    {
      hint: `run "${[exec.command, ...(exec.args ?? [])].join(' ')}" yourself to see why (it may need a login first); config-sync shows only its exit code and last stderr line, never what it prints on stdout`,
      details: { command: exec.command, user },
    },
  );
}

function runPlugin(
  exec: ExecConfig,
  user: string,
  cluster: ExecCluster | undefined,
  timing: PluginTiming,
): Promise<{ credential: ExecCredential; expiresAt: number }> {
  return new Promise((resolve, reject) => {
    // (2)
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const e of exec.env ?? []) env[e.name] = e.value;
    env.KUBERNETES_EXEC_INFO = JSON.stringify({
      apiVersion: exec.apiVersion ?? 'client.authentication.k8s.io/v1',
      kind: 'ExecCredential',
      spec: { interactive: false, ...(cluster ? { cluster } : {}) },
    });
    // Its own process group (detached), so a timeout stops what it started too: a shell script
    // killed alone leaves its `sleep` or `curl` holding stdout, and the run would not end.
    const child = spawn(exec.command, [...(exec.args ?? [])], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    const lastStderrLine = () => {
      const lastLine = stderr.trim().split('\n').at(-1)?.trim();
      return lastLine ? `; its last line on stderr: ${lastLine}` : '; it wrote nothing on stderr';
    };
    const timer = setTimeout(() => {
      // Ends the run now, whatever still holds its pipes (a daemon it forked into a group of its own).
      timedOut = true;
      clearTimeout(notice);
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
      child.stdout.destroy();
      child.stderr.destroy();
      reject(failure(exec, user, `did not finish in ${seconds(timing.timeoutMs)}${lastStderrLine()}`));
    }, timing.timeoutMs);
    const notice = setTimeout(
      () =>
        timing.onWaiting(
          `waiting for the credential plugin "${exec.command}" of kubeconfig user "${user}" (${seconds(timing.noticeAfterMs)} so far; stopped after ${seconds(timing.timeoutMs)}); if it needs a login, run it yourself first`,
        ),
      timing.noticeAfterMs,
    );
    const settled = () => {
      clearTimeout(timer);
      clearTimeout(notice);
    };
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      stderr = (stderr + c).slice(-4096);
    });
    child.once('error', (error) => {
      settled();
      if (timedOut) return;
      reject(
        failure(
          exec,
          user,
          `could not be started (${(error as NodeJS.ErrnoException).code ?? error.message})`,
        ),
      );
    });
    child.once('close', (code, signal) => {
      settled();
      if (timedOut) return;
      // (3)
      if (code !== 0) {
        reject(failure(exec, user, `exited with code ${code ?? signal}${lastStderrLine()}`));
        return;
      }
      let status: (ExecCredential & { expirationTimestamp?: string }) | undefined;
      try {
        status = (JSON.parse(stdout) as { status?: ExecCredential & { expirationTimestamp?: string } })
          .status;
      } catch {
        reject(failure(exec, user, 'exited 0 but printed no ExecCredential JSON on stdout'));
        return;
      }
      if (!status?.token && !(status?.clientCertificateData && status.clientKeyData)) {
        reject(
          failure(exec, user, 'returned an ExecCredential with neither a token nor a client certificate'),
        );
        return;
      }
      const expires = status.expirationTimestamp ? Date.parse(status.expirationTimestamp) : Number.NaN;
      resolve({
        credential: {
          ...(status.token ? { token: status.token } : {}),
          ...(status.clientCertificateData ? { clientCertificateData: status.clientCertificateData } : {}),
          ...(status.clientKeyData ? { clientKeyData: status.clientKeyData } : {}),
        },
        // No expiry: kubectl keeps such a credential for the life of the process; so does this.
        expiresAt: Number.isNaN(expires) ? Number.POSITIVE_INFINITY : expires - 10_000,
      });
    });
  });
}
