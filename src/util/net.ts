import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { UsageError, type WxErrorOptions } from '../errors.js';
import { formatDuration } from './duration.js';

/** A server could not be bound: its port is taken, or its address is not this machine's (a usage error, exit 2). */
export class BindError extends UsageError {
  constructor(message: string, options: WxErrorOptions & { reason: 'in_use' | 'no_address' | 'not_allowed'; port: number; host: string }) {
    super(message, options);
    this.reason = options.reason;
    this.port = options.port;
    this.host = options.host;
  }
  /** Why: the port is taken (`in_use`), the address is not this machine's, or binding it needs privileges. */
  readonly reason: 'in_use' | 'no_address' | 'not_allowed';
  readonly port: number;
  readonly host: string;
}

/**
 * Binds a server (the receiver, the emulator, the inspector) and returns its port and the URL to show:
 * a port in use, or an address this machine does not have, is a BindError.
 */
export async function listenOn(server: Server, host: string, port: number, path = ''): Promise<{ port: number; url: string }> {
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new BindError(`Port ${port} on ${host} is already in use.`, { hint: 'Pick another with --port (0 picks a free one).', reason: 'in_use', port, host });
    if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN')
      throw new BindError(`Cannot bind ${host}: ${code}.`, { hint: 'Give an address of this machine, such as 127.0.0.1.', reason: 'no_address', port, host });
    if (code === 'EACCES')
      throw new BindError(`Not allowed to bind port ${port} on ${host} (EACCES).`, { hint: 'Ports under 1024 need privileges; pick another with --port.', reason: 'not_allowed', port, host });
    throw err;
  }
  const bound = (server.address() as AddressInfo).port;
  return { port: bound, url: `http://${shownHost(host)}:${bound}${path}` };
}

/** A bound address as a URL shows it: IPv6 in brackets, and the address that reaches "every address". */
export function shownHost(host: string): string {
  if (host.includes(':')) return host === '::' ? '[::1]' : `[${host}]`;
  return host === '0.0.0.0' ? '127.0.0.1' : host;
}

/**
 * Whether a host name or address is this machine only (what only processes here can reach): localhost
 * (and names under it, RFC 6761), ::1, and the addresses 127.0.0.0/8. A name that merely starts with
 * "127." (127.evil.example) is a name like any other.
 */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h.endsWith('.localhost') || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

const TIMEOUTS = new Set(['TimeoutError', 'AbortError', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/** Whether a request failed because its time ran out. */
export function isTimeout(err: unknown): boolean {
  const e = err as { name?: string; code?: string } | undefined;
  return TIMEOUTS.has(e?.name ?? '') || TIMEOUTS.has(e?.code ?? '');
}

/**
 * Why a request to another server failed, in a few words ("connection refused", "no answer within
 * 10s"), for every client in wxhooks: the service client, `send`, the forwarder, the emulator.
 */
export function networkReason(err: unknown, timeoutMs?: number): string {
  if (isTimeout(err)) return timeoutMs === undefined ? 'no answer in time' : `no answer within ${formatDuration(timeoutMs)}`;
  const e = err as { code?: string; message?: string; cause?: { code?: string } };
  const code = e.code ?? e.cause?.code;
  switch (code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host not found';
    case 'ECONNRESET':
    case 'EPIPE':
    case 'UND_ERR_SOCKET':
      return 'the connection was closed';
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'the connection timed out';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'no route to host';
    default:
      return code ? `${code}: ${e.message ?? ''}`.trim() : (e.message ?? String(err));
  }
}

/** At most this much of another server's answer is read: its start is what is shown. */
export const ANSWER_START: number = 64 * 1024;

/**
 * The start of an answer's body (at most `max` bytes), as text; then it stops reading and lets the
 * body go, so that a server answering without end costs neither memory nor time.
 */
export async function readStart(body: AsyncIterable<unknown> & { destroy?(): unknown }, max: number = ANSWER_START): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      const bytes = chunk as Buffer;
      chunks.push(bytes);
      size += bytes.length;
      if (size >= max) break; // leaving the loop destroys the stream
    }
  } catch {
    // the answer broke off: what came is what there is
  } finally {
    body.destroy?.();
  }
  return Buffer.concat(chunks).subarray(0, max).toString('utf8');
}
