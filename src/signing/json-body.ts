/**
 * A delivery's body as a JSON object, without materialising a large one.
 *
 * Up to LARGE_BODY bytes, JSON.parse does it. Above, parsing a 20 MB gridded
 * response would build some 150 MB of JavaScript values (measured), so the
 * body is instead checked against the JSON grammar byte by byte, and only its
 * small members (and the small members of `data`) are parsed: what `listen`
 * shows. Both paths accept and refuse the same texts.
 */
export const LARGE_BODY: number = 1024 * 1024;
const SMALL_MEMBER = 64 * 1024;

export type BodyObject = Record<string, unknown>;

export function parseBodyObject(body: Buffer, largeAt: number = LARGE_BODY): BodyObject | undefined {
  if (body.length <= largeAt) {
    let value: unknown;
    try {
      value = JSON.parse(body.toString('utf8'));
    } catch {
      return undefined;
    }
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as BodyObject) : undefined;
  }
  const first = skipWs(body, 0);
  if (body[first] !== 0x7b /* { */ || validEnd(body) === false) return undefined;
  return shallowObject(body, first, 0);
}

const isWs = (c: number | undefined) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
const isDigit = (c: number | undefined) => c !== undefined && c >= 0x30 && c <= 0x39;
const isHex = (c: number | undefined) => c !== undefined && ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66));

function skipWs(b: Buffer, i: number): number {
  while (i < b.length && isWs(b[i])) i++;
  return i;
}

/** The index after a string starting at b[i] === '"', or -1 if it is not a valid JSON string. */
function stringEnd(b: Buffer, i: number): number {
  i++;
  for (;;) {
    const c = b[i];
    if (c === undefined || c < 0x20) return -1;
    if (c === 0x22) return i + 1;
    if (c === 0x5c) {
      const e = b[i + 1];
      if (e === 0x75) {
        if (!isHex(b[i + 2]) || !isHex(b[i + 3]) || !isHex(b[i + 4]) || !isHex(b[i + 5])) return -1;
        i += 6;
      } else if (e === 0x22 || e === 0x5c || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) i += 2;
      else return -1;
    } else i++;
  }
}

/** The index after `"key":` starting at i (a member's key and its colon), or -1. */
function afterKey(b: Buffer, i: number): number {
  if (b[i] !== 0x22) return -1;
  i = stringEnd(b, i);
  if (i < 0) return -1;
  i = skipWs(b, i);
  return b[i] === 0x3a ? i + 1 : -1;
}

/** The index after a number starting at i, or -1. */
function numberEnd(b: Buffer, i: number): number {
  if (b[i] === 0x2d) i++;
  if (b[i] === 0x30) i++;
  else if (isDigit(b[i])) while (isDigit(b[i])) i++;
  else return -1;
  if (b[i] === 0x2e) {
    i++;
    if (!isDigit(b[i])) return -1;
    while (isDigit(b[i])) i++;
  }
  if (b[i] === 0x65 || b[i] === 0x45) {
    i++;
    if (b[i] === 0x2b || b[i] === 0x2d) i++;
    if (!isDigit(b[i])) return -1;
    while (isDigit(b[i])) i++;
  }
  return i;
}

const LITERALS: [number, Buffer][] = [
  [0x74, Buffer.from('true')],
  [0x66, Buffer.from('false')],
  [0x6e, Buffer.from('null')],
];

/**
 * Checks the whole buffer is one JSON value (RFC 8259), without recursion, and
 * returns false if not. Container nesting is tracked on an explicit stack.
 */
function validEnd(b: Buffer): boolean {
  const stack: number[] = []; // 0x7b for an object, 0x5b for an array
  let i = skipWs(b, 0);
  // expecting: a value (after start, ':', ',' in an array, or '[')
  for (;;) {
    i = skipWs(b, i);
    const c = b[i];
    // a value
    if (c === 0x7b || c === 0x5b) {
      stack.push(c);
      i = skipWs(b, i + 1);
      if (b[i] === (c === 0x7b ? 0x7d : 0x5d)) {
        stack.pop();
        i++;
      } else if (c === 0x7b) {
        i = afterKey(b, i); // the first key of an object
        if (i < 0) return false;
        continue;
      } else continue;
    } else if (c === 0x22) {
      i = stringEnd(b, i);
      if (i < 0) return false;
    } else if (c === 0x2d || isDigit(c)) {
      i = numberEnd(b, i);
      if (i < 0) return false;
    } else {
      const lit = LITERALS.find(([first]) => first === c);
      if (!lit || !b.subarray(i, i + lit[1].length).equals(lit[1])) return false;
      i += lit[1].length;
    }
    // after a value: close containers, or a separator
    for (;;) {
      i = skipWs(b, i);
      const top = stack[stack.length - 1];
      if (top === undefined) return i === b.length;
      const d = b[i];
      if (d === 0x2c) {
        i = skipWs(b, i + 1);
        if (top === 0x7b) {
          i = afterKey(b, i);
          if (i < 0) return false;
        }
        break; // a value follows
      }
      if (d === (top === 0x7b ? 0x7d : 0x5d)) {
        stack.pop();
        i++;
        continue;
      }
      return false;
    }
  }
}

/** The end of the (valid) value starting at i. */
function skipValue(b: Buffer, i: number): number {
  const c = b[i];
  if (c === 0x22) return stringEnd(b, i);
  if (c !== 0x7b && c !== 0x5b) {
    let j = i;
    while (j < b.length && !isWs(b[j]) && b[j] !== 0x2c && b[j] !== 0x7d && b[j] !== 0x5d) j++;
    return j;
  }
  let depth = 0;
  for (let j = i; j < b.length; j++) {
    const d = b[j];
    if (d === 0x22) j = stringEnd(b, j) - 1;
    else if (d === 0x7b || d === 0x5b) depth++;
    else if (d === 0x7d || d === 0x5d) {
      depth--;
      if (depth === 0) return j + 1;
    }
  }
  return b.length;
}

/** The small members of the (valid) object at i; `data`, when large, by its own small members. */
function shallowObject(b: Buffer, i: number, depth: number): BodyObject {
  const out: BodyObject = {};
  i = skipWs(b, i + 1);
  while (b[i] === 0x22) {
    const keyEnd = stringEnd(b, i);
    const key = JSON.parse(b.toString('utf8', i, keyEnd)) as string;
    const start = skipWs(b, skipWs(b, keyEnd) + 1);
    const end = skipValue(b, start);
    if (end - start <= SMALL_MEMBER) own(out, key, JSON.parse(b.toString('utf8', start, end)));
    else if (depth === 0 && key === 'data' && b[start] === 0x7b) own(out, key, shallowObject(b, start, 1));
    i = skipWs(b, end);
    if (b[i] === 0x2c) i = skipWs(b, i + 1);
  }
  return out;
}

/**
 * Sets a member as JSON.parse does: as the object's own property, whatever its name (an assignment to
 * `__proto__` would set the object's prototype instead, and with it what every missing member reads as).
 */
function own(object: BodyObject, key: string, value: unknown): void {
  Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
}
