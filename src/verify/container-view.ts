// What kubelet gave the app container, for the targets it never updates (a subPath file, env
// vars), when the app's container and the agent's did not start together.
//
// Measured on a real node (kubelet v1.36.3, containerd 2.4.2): a container that restarts in the
// same Pod gets the *current* env values and the *current* subPath file, because kubelet
// resolves both again each time it creates a container. So:
//  - the app restarted after a change (a crash, an OOM kill) holds the new config, while the
//    agent's own copy of the subPath file (and the env baseline taken at the app's first start)
//    still shows the old one: comparing those would be a false drift;
//  - the agent restarted after a change (its own crash) sees the new subPath file in its own
//    mount, while the app still holds the old one: comparing that would be a false InSync, and
//    the drift would never heal.
// The agent's copy stands for the app's only when the agent's container started no later than
// the app's (the native sidecar's order). Otherwise the start times decide.

/** Clock slack between the API server (when a version appeared) and kubelet (when it started a container). */
export const START_SLACK_MS = 2000;

export type ContainerView =
  /** The agent's own copy (subPath file, env baseline) is what the app got: compare it. */
  | 'agent-copy'
  /** The app container started after the current version appeared: it holds that version. */
  | 'current'
  /** The app started before the current version and the agent after the app: the app is older. */
  | 'older';

/**
 * Steps:
 *  (0) the source was never changed since it was created, and the app started after that (within
 *      the slack): there is no older version to hold -> current;
 *  (1) the app started after the current version appeared (by more than the slack) -> current;
 *  (2) the agent's container started no later than the app's (within the slack), or either
 *      start is unknown -> the agent's copy stands for the app's;
 *  (3) otherwise the agent started later, and the app holds a version from before the current
 *      one -> older. A start time within the slack of the change is not (1): in doubt, the app
 *      may hold the old version, and a restart is the safe side.
 */
export function containerView(
  appStartedAt: number | undefined,
  agentStartedAt: number | undefined,
  versionSince: number | undefined,
  neverChanged = false,
): ContainerView {
  // (0)
  if (
    neverChanged &&
    appStartedAt !== undefined &&
    versionSince !== undefined &&
    appStartedAt >= versionSince - START_SLACK_MS
  )
    return 'current';
  // (1)
  if (
    appStartedAt !== undefined &&
    versionSince !== undefined &&
    appStartedAt > versionSince + START_SLACK_MS
  )
    return 'current';
  // (2)
  if (appStartedAt === undefined || agentStartedAt === undefined) return 'agent-copy';
  if (agentStartedAt <= appStartedAt + START_SLACK_MS) return 'agent-copy';
  // (3)
  return 'older';
}
