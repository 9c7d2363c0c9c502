import { BlockList, isIP } from 'node:net';
import type { EnvError } from './errors.ts';
import type { ConfigError, TickwardenConfig } from './types.ts';

/** Link-local addresses (169.254.0.0/16, fe80::/10), where clouds serve instance metadata and credentials: always refused. */
const LINK_LOCAL = new BlockList();
LINK_LOCAL.addSubnet('169.254.0.0', 16, 'ipv4');
LINK_LOCAL.addSubnet('fe80::', 10, 'ipv6');

/** Host names and CIDRs of one list: `10.0.0.0/8`, `2001:db8::/32`, `api.example.com`, `*.example.com` (its subdomains). */
interface DestinationList {
  cidrs: BlockList;
  /** Whether `cidrs` holds any rule (a BlockList cannot say). */
  hasCidrs: boolean;
  hosts: string[];
}

/**
 * Where http handlers may connect, for one deployment: `TICKWARDEN_HTTP_ALLOW` (unset: anywhere
 * not denied) and `TICKWARDEN_HTTP_DENY`; link-local addresses are always denied. A deny wins. Checked on
 * the URL when a config is validated, and on every address a name resolves to when a run connects
 * (so a name that resolves somewhere denied later is refused too).
 */
export interface HttpDestinations {
  allow: DestinationList | undefined;
  deny: DestinationList;
}

export const ALLOW_VARIABLE = 'TICKWARDEN_HTTP_ALLOW';
export const DENY_VARIABLE = 'TICKWARDEN_HTTP_DENY';

const HOST = /^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;

function parseList(variable: string, text: string | undefined, errors: EnvError[]): DestinationList {
  const list: DestinationList = { cidrs: new BlockList(), hasCidrs: false, hosts: [] };
  const entries = (text ?? '')
    .split(',')
    .map((entry) => entry.trim().toLowerCase())
    .filter((entry) => entry !== '');
  for (const entry of entries) {
    const [address = '', prefixText, extra] = entry.split('/');
    const family = isIP(address);
    if (family !== 0) {
      const max = family === 4 ? 32 : 128;
      const prefix = prefixText === undefined ? max : Number(prefixText);
      if (
        extra !== undefined ||
        !Number.isInteger(prefix) ||
        prefix < 0 ||
        prefix > max ||
        (prefixText !== undefined && !/^\d+$/.test(prefixText))
      ) {
        errors.push({
          variable,
          message: `entry "${entry}": expected an address or a CIDR such as 10.0.0.0/8 (prefix 0-${max})`,
        });
        continue;
      }
      list.cidrs.addSubnet(address, prefix, family === 4 ? 'ipv4' : 'ipv6');
      list.hasCidrs = true;
    } else if (HOST.test(entry)) list.hosts.push(entry);
    else
      errors.push({
        variable,
        message: `entry "${entry}": expected a CIDR (10.0.0.0/8), an address, a host name or *.domain`,
      });
  }
  return list;
}

/** Reads the two variables; every bad entry is an error naming its variable. */
export function parseHttpDestinations(
  allow: string | undefined,
  deny: string | undefined,
): { value: HttpDestinations; errors: EnvError[] } {
  const errors: EnvError[] = [];
  const value = {
    allow: allow === undefined || allow.trim() === '' ? undefined : parseList(ALLOW_VARIABLE, allow, errors),
    deny: parseList(DENY_VARIABLE, deny, errors),
  };
  return { value, errors };
}

/** The policy with nothing set: link-local denied, anything else allowed. */
export const DEFAULT_HTTP_DESTINATIONS: HttpDestinations = parseHttpDestinations(undefined, undefined).value;

const hostMatches = (list: DestinationList, host: string): boolean =>
  list.hosts.some((rule) => (rule.startsWith('*.') ? host.endsWith(rule.slice(1)) : host === rule));

/** An address without URL brackets, with its family; BlockList checks an IPv4-mapped IPv6 address against IPv4 rules. */
function normalized(address: string): { address: string; type: 'ipv4' | 'ipv6' } | undefined {
  const bare = address.replace(/^\[|\]$/g, '').toLowerCase();
  const family = isIP(bare);
  return family === 0 ? undefined : { address: bare, type: family === 4 ? 'ipv4' : 'ipv6' };
}

const inList = (list: DestinationList, ip: { address: string; type: 'ipv4' | 'ipv6' }): boolean =>
  list.hasCidrs && list.cidrs.check(ip.address, ip.type);

/**
 * Why a URL's host is refused before any lookup, or undefined: a denied name or address, or one
 * outside an allow list that a name alone can decide (an allow list of names only). A name that
 * an allow list may admit by address is decided when the run connects ({@link addressRefusal}).
 */
export function hostRefusal(policy: HttpDestinations, hostname: string): string | undefined {
  const host = hostname.toLowerCase();
  const ip = normalized(host);
  if (ip) return addressRefusal(policy, ip.address, ip.address);
  if (hostMatches(policy.deny, host)) return `host ${host} is denied (${DENY_VARIABLE})`;
  const { allow } = policy;
  if (allow && !hostMatches(allow, host) && !allow.hasCidrs) return `host ${host} is not in ${ALLOW_VARIABLE}`;
  return undefined;
}

/** Why connecting to `address` (what `hostname` resolved to, or the host itself) is refused, or undefined. */
export function addressRefusal(policy: HttpDestinations, hostname: string, address: string): string | undefined {
  const ip = normalized(address);
  if (!ip) return `${address} is not an IP address`;
  const host = hostname.toLowerCase();
  const named = host === ip.address || host === address ? '' : ` (${host})`;
  if (LINK_LOCAL.check(ip.address, ip.type))
    return `address ${ip.address}${named} is link-local (cloud metadata lives there): always denied`;
  if (inList(policy.deny, ip)) return `address ${ip.address}${named} is denied (${DENY_VARIABLE})`;
  const { allow } = policy;
  if (allow && !hostMatches(allow, host) && !inList(allow, ip))
    return `address ${ip.address}${named} is not in ${ALLOW_VARIABLE}`;
  return undefined;
}

/** The http schedules whose URL the policy refuses, as config errors at their `url`. */
export function httpDestinationErrors(config: TickwardenConfig, policy: HttpDestinations): ConfigError[] {
  const errors: ConfigError[] = [];
  const indexInFile = new Map<string, number>();
  for (const schedule of config.schedules) {
    const index = indexInFile.get(schedule.source.file) ?? 0;
    indexInFile.set(schedule.source.file, index + 1);
    if (schedule.handler.kind !== 'http') continue;
    const refusal = hostRefusal(policy, new URL(schedule.handler.url).hostname);
    if (refusal !== undefined) {
      errors.push({
        file: schedule.source.file,
        line: schedule.source.line,
        column: 1,
        path: ['schedules', index, 'handler', 'url'],
        message: `destination refused: ${refusal}`,
      });
    }
  }
  return errors;
}
