import { randomBytes } from 'node:crypto';
import { mkdir, open, rename } from 'node:fs/promises';
import { join } from 'node:path';

/** A delivery as `listen --save-dir` writes it, and `verify` and `send` read it back. */
export interface SavedDelivery {
  wxhooks_delivery: 1;
  received_at: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  /** The body as text, when it is valid UTF-8 that round-trips byte for byte. */
  body?: string;
  /** Otherwise the exact bytes, in base64. */
  body_base64?: string;
}

export function toSaved(received: Date, method: string, path: string, headers: Record<string, string | string[] | undefined>, body: Buffer): SavedDelivery {
  const flat: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) flat[k] = Array.isArray(v) ? v.join(', ') : v;
  const text = body.toString('utf8');
  const exact = Buffer.byteLength(text) === body.length && Buffer.from(text, 'utf8').equals(body);
  return {
    wxhooks_delivery: 1,
    received_at: received.toISOString(),
    method,
    path,
    headers: flat,
    ...(exact ? { body: text } : { body_base64: body.toString('base64') }),
  };
}

export function savedBody(saved: SavedDelivery): Buffer {
  if (saved.body_base64 !== undefined) return Buffer.from(saved.body_base64, 'base64');
  return Buffer.from(saved.body ?? '', 'utf8');
}

export function isSavedDelivery(value: unknown): value is SavedDelivery {
  return typeof value === 'object' && value !== null && (value as SavedDelivery).wxhooks_delivery === 1 && typeof (value as SavedDelivery).headers === 'object';
}

/** Writes one delivery atomically into `dir`; returns the file's path. */
export async function saveDelivery(dir: string, saved: SavedDelivery, name: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const safe = name.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 120);
  const file = join(dir, `${saved.received_at.replace(/[:.]/g, '-')}-${safe}.json`);
  const tmp = `${file}.${randomBytes(4).toString('hex')}.tmp`;
  const h = await open(tmp, 'wx', 0o600);
  try {
    await h.writeFile(JSON.stringify(saved, null, 2));
  } finally {
    await h.close();
  }
  await rename(tmp, file);
  return file;
}
