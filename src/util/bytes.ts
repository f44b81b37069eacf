/** A body as JSON can carry it: as text when it is UTF-8 that round-trips byte for byte, else in base64. */
export function textOrBase64(body: Buffer): { body: string } | { body_base64: string } {
  const text = body.toString('utf8');
  return Buffer.byteLength(text) === body.length && Buffer.from(text, 'utf8').equals(body) ? { body: text } : { body_base64: body.toString('base64') };
}

/** A value as an identifier's text: a string, or a number written out; anything else is none. */
export const idText = (v: unknown): string | undefined => (typeof v === 'string' || typeof v === 'number' ? String(v) : undefined);
