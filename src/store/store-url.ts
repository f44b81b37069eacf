import { UsageError } from '../errors.js';

/** The query parameters of a PostgreSQL URL that carry a credential (libpq's and `pg`'s names). */
const SECRET_PARAMS = ['password', 'sslpassword'];

/** The credentials a store URL carries, in every form libpq and `pg` accept: user-info, `password=`, `sslpassword=`. */
export function storeSecrets(url: string): string[] {
  try {
    const u = new URL(url);
    const out = [decodeURIComponent(u.password), u.password];
    for (const [name, value] of u.searchParams) if (SECRET_PARAMS.includes(name.toLowerCase())) out.push(value, encodeURIComponent(value));
    return out.filter((v) => v.length > 0);
  } catch {
    return [];
  }
}

/** A store URL as it may be shown: without its password, in whichever form it was given. */
export function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    for (const name of [...u.searchParams.keys()]) if (SECRET_PARAMS.includes(name.toLowerCase())) u.searchParams.set(name, '***');
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
