import { UsageError } from '../errors.js';

/** A store URL as it may be shown: without its password. */
export function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'the store URL';
  }
}

/** Checks a store URL: `file`, or `postgres://` / `postgresql://` with a host; a usage error (exit 2) otherwise. */
export function storeKind(url: string): 'file' | 'postgres' {
  if (url === 'file') return 'file';
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new UsageError('--store must be "file" or a postgres://user:password@host:port/database URL, and this one is not a URL.');
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') throw new UsageError(`--store must be "file" or a postgres:// URL, not ${u.protocol}//…`);
  if (!u.hostname) throw new UsageError('--store names no host: postgres://user:password@host:port/database');
  return 'postgres';
}

