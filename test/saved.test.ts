import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isMarked, openSaveDir, readSavedFile, saveDelivery, savedBody, savedFileBytes, savedMeta, saveKeyOf } from '../src/receiver/saved.js';
import { tempDir } from './helpers/cli.js';

// A saved delivery's file is made from the body's own bytes (#32.6): it must be, byte for byte, the file
// JSON.stringify made from strings before, so that every reader (and an old file's mark) is unchanged.

const meta = savedMeta('2026-11-25T00:00:00.000Z', 'POST', '/hooks?a="b"', { 'trigger-id': 'trg_1', 'x-odd': '"body": ""\n' }, 'standard');

/** The file as it was made before (toSaved, then JSON.stringify): the body as text when it round-trips, else base64, before the layout. */
function asStrings(body: Buffer, mark?: string): string {
  const text = body.toString('utf8');
  const roundTrips = Buffer.from(text, 'utf8').equals(body);
  const { layout, ...received } = meta;
  return JSON.stringify({ ...received, ...(roundTrips ? { body: text } : { body_base64: body.toString('base64') }), layout, ...(mark ? { verified_mark: mark } : {}) }, null, 2);
}

describe('savedFileBytes', () => {
  const bodies: [string, Buffer][] = [
    ['empty', Buffer.alloc(0)],
    ['plain JSON', Buffer.from('{"type":"forecast_hour.available","data":{"model":"wm-6"}}')],
    ['every control, quote and backslash', Buffer.from(Array.from({ length: 0x20 }, (_, i) => String.fromCharCode(i)).join('') + '"\\/\u007f')],
    ['non-ASCII, an emoji, U+2028', Buffer.from('{"name":"Zürich ☀ 🌧\u2028"}')],
    ['a byte-order mark', Buffer.from('\ufeff{"a":1}')],
    ['not UTF-8 (random bytes)', randomBytes(4096)],
    ['an encoded lone surrogate (not UTF-8)', Buffer.from([0x7b, 0xed, 0xa0, 0x80, 0x7d])],
  ];

  it.each(bodies)('%s: the same bytes as the file made from strings, and read back to the same body', (_name, body) => {
    const bytes = savedFileBytes(meta, body, undefined);
    expect(bytes.toString('utf8')).toBe(asStrings(body));
    expect(bytes.equals(Buffer.from(asStrings(body)))).toBe(true);
    expect(savedBody(JSON.parse(bytes.toString('utf8'))).equals(body)).toBe(true);
  });

  it('its mark is the one a reader checks, for a text body and a base64 one', async () => {
    const dir = tempDir();
    await openSaveDir(dir, tempDir('wxhooks-cfg-'));
    for (const body of [Buffer.from('{"a":"\\n"}'), randomBytes(100)]) {
      const file = await saveDelivery(dir, meta, body, 'trg_1-1');
      const saved = await readSavedFile(file);
      expect(isMarked(saved, saveKeyOf(dir))).toBe(true);
      expect(savedBody(saved).equals(body)).toBe(true);
      expect(readFileSync(file, 'utf8')).toBe(asStrings(body, saved.verified_mark));
      // changed by one byte, it no longer carries the mark
      expect(isMarked({ ...saved, path: '/other' }, saveKeyOf(dir))).toBe(false);
    }
  });
});
