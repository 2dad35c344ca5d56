// What doctor says about the API server's version (doctor/server-version.ts).
import { describe, expect, it } from 'vitest';
import { parseServerVersion, serverVersionFindings } from '../../src/doctor/server-version.ts';

describe("the API server's version", () => {
  it('reads vMAJOR.MINOR from upstream and vendor builds', () => {
    expect(parseServerVersion('v1.36.3')).toEqual({ major: 1, minor: 36 });
    expect(parseServerVersion('v1.29.4-gke.1043000')).toEqual({ major: 1, minor: 29 });
    expect(parseServerVersion('v1.30.0+k3s1')).toEqual({ major: 1, minor: 30 });
    expect(parseServerVersion('v1.3')).toEqual({ major: 1, minor: 3 });
    expect(parseServerVersion('devel')).toBeUndefined();
    expect(parseServerVersion('v1.2x.0')).toBeUndefined();
  });

  it('1.30 and newer: nothing to say', () => {
    expect(serverVersionFindings('v1.30.0')).toEqual({});
    expect(serverVersionFindings('v1.36.3')).toEqual({});
    expect(serverVersionFindings('v2.0.0')).toEqual({});
  });

  it('1.29: a note that only RBAC holds the token there', () => {
    const { problem, note } = serverVersionFindings('v1.29.4-eks-1');
    expect(problem).toBeUndefined();
    expect(note).toMatch(/v1\.29\.4-eks-1: the admission policies .* need 1\.30, so here only RBAC holds/);
  });

  it('older: a configuration problem (exit 2) naming what needs which version, and the fix', () => {
    const { problem } = serverVersionFindings('v1.28.9');
    expect(problem?.code).toBe('CS_CONFIG_SERVER_TOO_OLD');
    expect(problem?.domain).toBe('config');
    expect(problem?.message).toMatch(/v1\.28\.9: the sidecar is a native sidecar .* needs 1\.29/);
    expect(problem?.hint).toMatch(/upgrade the cluster to Kubernetes 1\.30/);
  });

  it('a version it cannot read: a note, never a guess', () => {
    expect(serverVersionFindings('devel')).toEqual({
      note: expect.stringMatching(/"devel" is not vMAJOR\.MINOR/),
    });
  });
});
