// Which proxy, if any, carries the connection to the API server: decided as client-go decides it
// (Go's net/http ProxyFromEnvironment under a kubeconfig's proxy-url), so that config-sync goes
// wherever kubectl goes from the same shell or Pod. Pure: the environment and the kubeconfig's
// value are handed in (scope.ts); the tunnel itself is proxy-tunnel.ts.
//
// The decision, step by step:
//  (1) the kubeconfig cluster's `proxy-url`, when it sets one: always used, NO_PROXY does not
//      apply to it (client-go's rest.Config.Proxy);
//  (2) otherwise the environment: HTTPS_PROXY for an https server, HTTP_PROXY for an http one,
//      the upper-case name before the lower-case one; unset or empty: no proxy;
//  (3) never for `localhost` or a loopback address;
//  (4) never for a host NO_PROXY (or no_proxy) names, as Go reads the list: `*` for every host;
//      an IP address or a CIDR; a domain, matching itself and its subdomains (`example.com`,
//      or `.example.com` and `*.example.com` for the subdomains only); each but a CIDR
//      optionally with `:port`, matching that port only;
//  (5) a value without a scheme is read as `http://` (Go does the same); the schemes are http,
//      https and socks5 (socks5h), kubectl's. Any other is an error naming where it came from:
//      Go would fail every request with it, and a person should hear of it before the first.
import { BlockList, isIP } from 'node:net';
import { ConfigSyncError } from '../errors.ts';

/** The environment variables that choose a proxy, as read from the process. */
export interface ProxyEnv {
  readonly HTTPS_PROXY?: string | undefined;
  readonly https_proxy?: string | undefined;
  readonly HTTP_PROXY?: string | undefined;
  readonly http_proxy?: string | undefined;
  readonly NO_PROXY?: string | undefined;
  readonly no_proxy?: string | undefined;
}

export const PROXY_ENV_NAMES = [
  'HTTPS_PROXY',
  'https_proxy',
  'HTTP_PROXY',
  'http_proxy',
  'NO_PROXY',
  'no_proxy',
] as const satisfies readonly (keyof ProxyEnv)[];

/** A proxy to go through, and where it came from. */
export interface ProxyRoute {
  /** The whole URL, credentials included: for the tunnel only, never printed. */
  readonly url: URL;
  /** The proxy as a person may see it: scheme, user name, host and port; never a password. */
  readonly shown: string;
  /** `HTTPS_PROXY`, or `kubeconfig cluster "x" proxy-url`. */
  readonly source: string;
  /** What JSON (doctor --output json, a log line) gets: `shown` and `source`, never the URL. */
  toJSON(): { shown: string; source: string };
}

const SCHEMES = new Set(['http:', 'https:', 'socks5:', 'socks5h:']);
const DEFAULT_PORTS: Readonly<Record<string, string>> = {
  'http:': '80',
  'https:': '443',
  'socks5:': '1080',
  'socks5h:': '1080',
};

/** A URL's host without the brackets of an IPv6 address: what sockets and TLS take. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '');
}

/** A URL's port, or its scheme's default. */
export function portOf(url: URL): number {
  return Number(url.port || DEFAULT_PORTS[url.protocol] || 0);
}

type KubeconfigProxy = { readonly value: string; readonly source: string } | undefined;

/** A proxy to go through, or none: then, if a proxy variable is set, why it is not used. */
export interface ProxyDecision {
  readonly route?: ProxyRoute;
  readonly bypassed?: string;
}

/** The proxy for requests to `server`, or undefined to go straight (decideProxy's route). */
export function resolveProxy(
  server: string,
  kubeconfigProxy: KubeconfigProxy,
  env: ProxyEnv,
): ProxyRoute | undefined {
  return decideProxy(server, kubeconfigProxy, env).route;
}

/**
 * What the connection to `server` goes through, steps (1) to (5): a proxy (`route`), or
 * straight to the server, with why (`bypassed`) when a proxy variable is set but not used for
 * it, for doctor to show ("why does it not go through my proxy?"). `kubeconfigProxy` is the
 * cluster's proxy-url and where it was read.
 */
export function decideProxy(server: string, kubeconfigProxy: KubeconfigProxy, env: ProxyEnv): ProxyDecision {
  // (1)
  if (kubeconfigProxy) return { route: route(kubeconfigProxy.value, kubeconfigProxy.source) };
  // (2)
  const target = new URL(server);
  const names =
    target.protocol === 'http:'
      ? (['HTTP_PROXY', 'http_proxy'] as const)
      : (['HTTPS_PROXY', 'https_proxy'] as const);
  const name = names.find((n) => env[n]);
  const value = name ? env[name] : undefined;
  if (!name || !value) return {};
  // (3), (4)
  const host = hostOf(target);
  const noProxy = env.NO_PROXY || env.no_proxy || '';
  if (!usesProxy(host, target.port || DEFAULT_PORTS[target.protocol] || '', noProxy)) {
    const list = env.NO_PROXY ? 'NO_PROXY' : 'no_proxy';
    return {
      bypassed: `${name} is set, but ${isLoopbackHost(host) ? `${host} is a loopback address, never proxied` : `${list} names ${host}`}: straight to the server`,
    };
  }
  return { route: route(value, name) };
}

/** (5) */
function route(value: string, source: string): ProxyRoute {
  const url = parseProxy(value.trim());
  if (!url || !SCHEMES.has(url.protocol) || !url.hostname) {
    throw new ConfigSyncError(
      'CS_SCOPE_BAD_PROXY',
      `the proxy ${url ? shownOf(url) : 'value'} from ${source} is not an http://, https:// or socks5:// proxy URL`,
      {
        hint: `set ${source} to a proxy URL such as http://proxy.example:3128, or unset it`,
        details: { source },
      },
    );
  }
  const shown = shownOf(url);
  return { url, shown, source, toJSON: () => ({ shown, source }) };
}

/** Go's parseProxy: the value as a URL, or with `http://` in front when it has no scheme or host. */
function parseProxy(value: string): URL | undefined {
  const parsed = URL.canParse(value) ? new URL(value) : undefined;
  if (parsed?.protocol && parsed.host) return parsed;
  return URL.canParse(`http://${value}`) ? new URL(`http://${value}`) : parsed;
}

function shownOf(url: URL): string {
  const user = url.username ? `${url.username}@` : '';
  return `${url.protocol}//${user}${url.host}`;
}

/** (3), (4): whether requests to host:port go through the proxy. */
export function usesProxy(host: string, port: string, noProxy: string): boolean {
  if (isLoopbackHost(host)) return false;
  const h = host.toLowerCase();
  const family = isIP(h);
  for (const raw of noProxy.split(',')) {
    const entry = raw.trim().toLowerCase();
    if (!entry) continue;
    if (entry === '*') return false;
    if (matches(entry, h, family, port)) return false;
  }
  return true;
}

/** (3) `localhost` or a loopback address. */
function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase();
  const family = isIP(h);
  return h === 'localhost' || (family !== 0 && isLoopback(h, family));
}

function isLoopback(ip: string, family: number): boolean {
  const loopback = new BlockList();
  loopback.addSubnet('127.0.0.0', 8, 'ipv4');
  loopback.addAddress('::1', 'ipv6');
  // An IPv4-mapped IPv6 address of the loopback net is loopback too (Go's IsLoopback).
  if (family === 6 && /^::ffff:127\./.test(ip)) return true;
  return loopback.check(ip, family === 4 ? 'ipv4' : 'ipv6');
}

/** One NO_PROXY entry against the host (lower-case, no brackets) and its port. */
function matches(entry: string, host: string, family: number, port: string): boolean {
  // A CIDR: IP hosts within it, on any port.
  const cidr = entry.match(/^(.+)\/(\d{1,3})$/);
  if (cidr) {
    const [, net = '', bits = ''] = cidr;
    const netFamily = isIP(net);
    if (netFamily === 0 || family !== netFamily) return false;
    const list = new BlockList();
    try {
      list.addSubnet(net, Number(bits), netFamily === 4 ? 'ipv4' : 'ipv6');
    } catch {
      return false;
    }
    return list.check(host, family === 4 ? 'ipv4' : 'ipv6');
  }
  const { name, entryPort } = splitEntry(entry);
  if (!name) return false;
  if (entryPort && entryPort !== port) return false;
  // An IP address: that address only.
  if (isIP(name) !== 0) return family !== 0 && sameIp(name, host);
  // A domain, never an IP host: `.example.com` and `*.example.com` match the subdomains,
  // `example.com` itself too.
  if (family !== 0) return false;
  const suffix = name.startsWith('*.') ? name.slice(1) : name.startsWith('.') ? name : `.${name}`;
  const itself = !name.startsWith('.') && !name.startsWith('*.');
  return host.endsWith(suffix) || (itself && host === suffix.slice(1));
}

/** `host`, `host:port` or `[v6]:port`: a bare IPv6 address has colons but no port. */
function splitEntry(entry: string): { name: string; entryPort: string } {
  const bracketed = entry.match(/^\[([^\]]*)\](?::(\d*))?$/);
  if (bracketed) return { name: bracketed[1] ?? '', entryPort: bracketed[2] ?? '' };
  if (isIP(entry) === 6) return { name: entry, entryPort: '' };
  const colon = entry.lastIndexOf(':');
  if (colon < 0) return { name: entry, entryPort: '' };
  return { name: entry.slice(0, colon), entryPort: entry.slice(colon + 1) };
}

function sameIp(a: string, b: string): boolean {
  const family = isIP(a);
  if (family !== isIP(b)) return false;
  const list = new BlockList();
  list.addAddress(a, family === 4 ? 'ipv4' : 'ipv6');
  return list.check(b, family === 4 ? 'ipv4' : 'ipv6');
}
