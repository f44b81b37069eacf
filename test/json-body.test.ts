import { describe, expect, it } from 'vitest';
import { parseBodyObject } from '../src/signing/json-body.js';

/** What JSON.parse says: an object, or not. */
function reference(text: Buffer): boolean {
  try {
    const v = JSON.parse(text.toString('utf8')) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v);
  } catch {
    return false;
  }
}

const scan = (b: Buffer) => parseBodyObject(b, 0); // force the byte scanner

describe('the large-body scanner agrees with JSON.parse', () => {
  it.each([
    '{}',
    ' { } ',
    '{"a":1}',
    '{"a":[1,2,{"b":null}],"c":"x\\u00e9\\n","d":-0.5e+10,"e":true,"f":false}',
    '{"a":"\\ud83d\\ude00"}',
    '[]',
    '[1]',
    '"str"',
    '1',
    'null',
    '',
    '{',
    '{"a":}',
    '{"a":1,}',
    '{"a" 1}',
    '{a:1}',
    '{"a":01}',
    '{"a":1.}',
    '{"a":.5}',
    '{"a":1e}',
    '{"a":+1}',
    '{"a":tru}',
    '{"a":"\\x"}',
    '{"a":"\\u12"}',
    '{"a":"tab\there"}',
    '{"a":1}{',
    '{"a":1} x',
    '{"a":[1,]}',
    '{"a":[,1]}',
    '{"a":{"b":[}]}',
    '\ufeff{"a":1}',
    '{"a":1}\n',
  ])('%j', (text) => {
    const b = Buffer.from(text);
    expect(scan(b) !== undefined).toBe(reference(b));
  });

  it('agrees on 3000 random mutations of a delivery', () => {
    const base = JSON.stringify({
      type: 'forecast_hour.available',
      trigger_id: 'trg_1',
      test: false,
      data: {
        model: 'wm-6',
        forecast_hour: 6,
        response: {
          values: [
            [271.5, -3e-2],
            [0, 1e10],
          ],
          ok: true,
          none: null,
          s: 'a\\"b',
        },
      },
    });
    let seed = 7;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const alphabet = '{}[]:,"\\ 0123456789.eE+-truefalsn\u00e9\t\n';
    for (let k = 0; k < 3000; k++) {
      const chars = [...base];
      const edits = 1 + rnd(3);
      for (let e = 0; e < edits; e++) {
        const at = rnd(chars.length);
        const op = rnd(3);
        const ch = alphabet[rnd(alphabet.length)]!;
        if (op === 0) chars.splice(at, 1);
        else if (op === 1) chars.splice(at, 0, ch);
        else chars[at] = ch;
      }
      const b = Buffer.from(chars.join(''));
      expect(scan(b) !== undefined, b.toString()).toBe(reference(b));
    }
  });

  it('keeps the small members, and the small members of a large data', () => {
    const values = Array.from({ length: 20000 }, (_, i) => i / 7);
    const body = Buffer.from(JSON.stringify({ type: 'forecast_hour.available', subscription_id: '12', data: { model: 'wm-6', forecast_hour: 6, response: { values } } }));
    const small = parseBodyObject(body, 1000)!;
    expect(small).toEqual({ type: 'forecast_hour.available', subscription_id: '12', data: { model: 'wm-6', forecast_hour: 6 } });
    expect(parseBodyObject(body)).toEqual(JSON.parse(body.toString()));
  });

  it('handles deep nesting without a stack overflow', () => {
    const deep = Buffer.from(`{"a":${'['.repeat(100000)}${']'.repeat(100000)}}`);
    expect(scan(deep)).toBeDefined();
    const broken = Buffer.from(`{"a":${'['.repeat(100000)}${']'.repeat(99999)}}`);
    expect(scan(broken)).toBeUndefined();
  });
});
