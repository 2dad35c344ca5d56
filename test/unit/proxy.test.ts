import { describe, expect, it } from 'vitest';
import { ConfigSyncError } from '../../src/errors.ts';
import { decideProxy, resolveProxy, usesProxy } from '../../src/kube/proxy.ts';

describe('resolveProxy: the proxy client-go would take', () => {
  const server = 'https://api.example.com:6443';

  it('takes HTTPS_PROXY for an https server, the upper-case name first', () => {
    const route = resolveProxy(server, undefined, {
      HTTPS_PROXY: 'http://upper:3128',
      https_proxy: 'http://lower:3128',
    });
    expect(route?.url.href).toBe('http://upper:3128/');
    expect(route?.source).toBe('HTTPS_PROXY');
    expect(resolveProxy(server, undefined, { https_proxy: 'http://lower:3128' })?.source).toBe('https_proxy');
    // An empty upper-case variable counts as unset, as Go's getEnvAny reads it.
    expect(
      resolveProxy(server, undefined, { HTTPS_PROXY: '', https_proxy: 'http://lower:3128' })?.source,
    ).toBe('https_proxy');
  });

  it('takes HTTP_PROXY for an http server only', () => {
    expect(resolveProxy(server, undefined, { HTTP_PROXY: 'http://p:1' })).toBeUndefined();
    expect(resolveProxy('http://api.example.com:8080', undefined, { HTTP_PROXY: 'http://p:1' })?.source).toBe(
      'HTTP_PROXY',
    );
    expect(
      resolveProxy('http://api.example.com:8080', undefined, { HTTPS_PROXY: 'http://p:1' }),
    ).toBeUndefined();
  });

  it('goes straight with no proxy variable', () => {
    expect(resolveProxy(server, undefined, {})).toBeUndefined();
  });

  it("takes the kubeconfig's proxy-url over the environment, and NO_PROXY does not apply to it", () => {
    const route = resolveProxy(
      'https://127.0.0.1:6443',
      { value: 'socks5://bastion:1080', source: 'kubeconfig cluster "c" proxy-url' },
      { HTTPS_PROXY: 'http://env:3128', NO_PROXY: '*' },
    );
    expect(route?.url.href).toBe('socks5://bastion:1080');
    expect(route?.source).toBe('kubeconfig cluster "c" proxy-url');
  });

  it('reads a value without a scheme as http://, as Go does', () => {
    expect(resolveProxy(server, undefined, { HTTPS_PROXY: 'proxy.corp:3128' })?.url.href).toBe(
      'http://proxy.corp:3128/',
    );
    expect(resolveProxy(server, undefined, { HTTPS_PROXY: '10.0.0.9:3128' })?.url.href).toBe(
      'http://10.0.0.9:3128/',
    );
  });

  it('shows the proxy without its password', () => {
    const route = resolveProxy(server, undefined, { HTTPS_PROXY: 'http://alice:s3cret@proxy.corp:3128' });
    expect(route?.shown).toBe('http://alice@proxy.corp:3128');
    expect(route?.url.password).toBe('s3cret');
    // doctor --output json prints the scope: the route serializes without its URL.
    expect(JSON.parse(JSON.stringify({ proxy: route }))).toEqual({
      proxy: { shown: 'http://alice@proxy.corp:3128', source: 'HTTPS_PROXY' },
    });
  });

  it('refuses a scheme kubectl does not speak, naming where it came from and never the password', () => {
    let error: unknown;
    try {
      resolveProxy(server, undefined, { HTTPS_PROXY: 'ftp://bob:hunter2@proxy.corp:2121' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigSyncError);
    expect((error as ConfigSyncError).code).toBe('CS_SCOPE_BAD_PROXY');
    expect((error as Error).message).toContain('HTTPS_PROXY');
    expect((error as Error).message).toContain('ftp://bob@proxy.corp:2121');
    expect(
      JSON.stringify({ ...(error as ConfigSyncError), message: (error as Error).message }),
    ).not.toContain('hunter2');
  });

  it('accepts socks5 and socks5h', () => {
    expect(resolveProxy(server, undefined, { HTTPS_PROXY: 'socks5://s:1080' })?.url.protocol).toBe('socks5:');
    expect(resolveProxy(server, undefined, { HTTPS_PROXY: 'socks5h://s' })?.url.protocol).toBe('socks5h:');
  });

  it('applies NO_PROXY (or no_proxy) to the server', () => {
    expect(
      resolveProxy(server, undefined, { HTTPS_PROXY: 'http://p:1', NO_PROXY: 'example.com' }),
    ).toBeUndefined();
    expect(
      resolveProxy(server, undefined, { HTTPS_PROXY: 'http://p:1', no_proxy: '.example.com' }),
    ).toBeUndefined();
    expect(
      resolveProxy('https://10.96.0.1:443', undefined, {
        HTTPS_PROXY: 'http://p:1',
        NO_PROXY: '10.96.0.0/12',
      }),
    ).toBeUndefined();
    expect(
      resolveProxy('https://[fd00::1]:443', undefined, { HTTPS_PROXY: 'http://p:1', NO_PROXY: 'fd00::/8' }),
    ).toBeUndefined();
    expect(
      resolveProxy('https://10.96.0.1', undefined, { HTTPS_PROXY: 'http://p:1', NO_PROXY: '10.96.0.1:443' }),
    ).toBe(undefined);
  });
});

// Go's own cases for NO_PROXY (golang.org/x/net/http/httpproxy proxy_test.go), host and port as
// canonicalAddr gives them.
describe('decideProxy: why a proxy that is set is not used', () => {
  it('names NO_PROXY (as spelled) or the loopback address, and nothing when no variable is set or it is used', () => {
    expect(
      decideProxy('https://10.96.0.1:443', undefined, {
        HTTPS_PROXY: 'http://p:1',
        no_proxy: '10.96.0.0/12',
      }).bypassed,
    ).toBe('HTTPS_PROXY is set, but no_proxy names 10.96.0.1: straight to the server');
    expect(decideProxy('https://127.0.0.1:6443', undefined, { https_proxy: 'http://p:1' }).bypassed).toBe(
      'https_proxy is set, but 127.0.0.1 is a loopback address, never proxied: straight to the server',
    );
    expect(decideProxy('https://10.96.0.1:443', undefined, {}).bypassed).toBeUndefined();
    expect(
      decideProxy('https://10.96.0.1:443', undefined, { HTTPS_PROXY: 'http://p:1' }).bypassed,
    ).toBeUndefined();
  });
});

describe('usesProxy: NO_PROXY read as Go reads it', () => {
  const cases: [string, string, string, boolean][] = [
    // [host, port, NO_PROXY, goes through the proxy]
    ['localhost', '80', '', false],
    ['127.0.0.1', '443', '', false],
    ['127.1.2.3', '443', '', false],
    ['::1', '443', '', false],
    ['example.com', '443', '', true],
    ['example.com', '443', '*', false],
    ['10.0.0.1', '443', '*', false],
    ['foo.bar', '443', 'foo.bar', false],
    ['baz.foo.bar', '443', 'foo.bar', false],
    ['foo.bar', '443', '.foo.bar', true],
    ['baz.foo.bar', '443', '.foo.bar', false],
    ['foo.bar', '443', '*.foo.bar', true],
    ['baz.foo.bar', '443', '*.foo.bar', false],
    ['barfoo.bar', '443', 'foo.bar', true],
    ['foo.bar', '80', 'foo.bar:80', false],
    ['foo.bar', '443', 'foo.bar:80', true],
    ['10.0.0.1', '443', '10.0.0.1', false],
    ['10.0.0.2', '443', '10.0.0.1', true],
    ['10.0.0.1', '80', '10.0.0.1:80', false],
    ['10.0.0.1', '443', '10.0.0.1:80', true],
    ['10.0.0.1', '443', '10.0.0.0/8', false],
    ['11.0.0.1', '443', '10.0.0.0/8', true],
    ['2001:db8::1', '443', '2001:db8::/32', false],
    ['2001:db9::1', '443', '2001:db8::/32', true],
    ['2001:db8::1', '443', '2001:db8::1', false],
    ['2001:db8::1', '443', '[2001:db8::1]:443', false],
    ['2001:db8::1', '80', '[2001:db8::1]:443', true],
    ['Example.COM', '443', 'example.com', false],
    ['a.example.com', '443', ' other.org , EXAMPLE.com ', false],
    // A domain entry never matches an IP host, and an IP entry never a name.
    ['10.0.0.1', '443', '0.0.1', true],
    ['example.com', '443', '10.0.0.1', true],
    ['10.0.0.1', '443', '10.0.0.0/99', true],
  ];
  it.each(cases)('%s:%s with NO_PROXY=%j -> proxy %s', (host, port, noProxy, expected) => {
    expect(usesProxy(host, port, noProxy)).toBe(expected);
  });
});
