import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

// Reading the README and the guides the way their tests run them: a guide's ```sh blocks, the mark
// above each (`<!-- tested: test/x.test.ts -->` or `<!-- not tested: why -->`), and the `wxhooks`
// commands of a block split into words as a shell would (quotes, `\` continuations, `$VAR`).

export const ROOT = resolve(import.meta.dirname, '../..');

/** A file of the repository, by its path from the root (`README.md`, `docs/listen.md`). */
export function doc(path: string): string {
  return readFileSync(resolve(ROOT, path), 'utf8');
}

export interface ShBlock {
  /** The block's text, without its fences. */
  body: string;
  /** The line the block's fence opens on (1-based). */
  line: number;
  /** The mark on the line above the fence, if any. */
  mark?: { tested: string } | { notTested: string };
}

/** Every ```sh block of a Markdown text, in order. */
export function shBlocks(text: string): ShBlock[] {
  const lines = text.split('\n');
  const blocks: ShBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = /^(`{3,})(\S*)\s*$/.exec(lines[i]!);
    if (!fence) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith(fence[1]!) && l.trim() === fence[1]);
    if (fence[2] === 'sh') {
      const above = lines[i - 1] ?? '';
      const tested = /^<!-- tested: (\S+) -->$/.exec(above);
      const notTested = /^<!-- not tested: (.+\S) -->$/.exec(above);
      blocks.push({
        body: lines.slice(i + 1, end).join('\n'),
        line: i + 1,
        mark: tested ? { tested: tested[1]! } : notTested ? { notTested: notTested[1]! } : undefined,
      });
    }
    i = end;
  }
  return blocks;
}

/** The first ```sh block after the first occurrence of `after` in `text` (a heading, a sentence). */
export function shBlockAfter(text: string, after: string): ShBlock {
  const at = text.indexOf(after);
  if (at < 0) throw new Error(`no "${after}" in the text`);
  const line = text.slice(0, at).split('\n').length;
  const block = shBlocks(text).find((b) => b.line > line);
  if (!block) throw new Error(`no sh block after "${after}"`);
  return block;
}

/** A shell line's words and operators: quotes removed, `$VAR` and `${VAR}` expanded from `env` (not in single quotes), a comment dropped. */
function words(line: string, env: Record<string, string | undefined>): string[] {
  const out: string[] = [];
  let word: string | undefined;
  const add = (s: string) => (word = (word ?? '') + s);
  const end = () => {
    if (word !== undefined) out.push(word);
    word = undefined;
  };
  const variable = (rest: string): [string, number] => {
    const m = /^\{(\w+)\}|^(\w+)/.exec(rest);
    if (!m) return ['$', 1];
    return [env[m[1] ?? m[2]!] ?? '', m[0].length + 1];
  };
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === "'") {
      const close = line.indexOf("'", i + 1);
      add(line.slice(i + 1, close));
      i = close;
    } else if (c === '"') {
      let j = i + 1;
      let text = '';
      for (; line[j] !== '"'; j++) {
        if (line[j] === '$') {
          const [value, used] = variable(line.slice(j + 1));
          text += value;
          j += used - 1;
        } else text += line[j];
      }
      add(text);
      i = j;
    } else if (c === '$' && line[i + 1] === '(') {
      end();
      out.push('$(');
      i++;
    } else if (c === '$') {
      const [value, used] = variable(line.slice(i + 1));
      add(value);
      i += used - 1;
    } else if (c === '<' && line[i + 1] === '(') {
      end();
      out.push('<(');
      i++;
    } else if (c === '#' && word === undefined) {
      break;
    } else if (c === '|' || c === ';' || c === ')' || c === '&') {
      end();
      out.push(line[i + 1] === c ? c + c : c);
      if (line[i + 1] === c) i++;
    } else if (/\s/.test(c)) {
      end();
    } else add(c);
  }
  end();
  return out;
}

const OPERATORS = new Set(['|', '||', '&', '&&', ';', ')', '$(', '<(']);

/**
 * The `wxhooks` commands of a block, each as the words after `wxhooks`: one per command of a line (a
 * pipe, `$(…)` and `<(…)` included), lines joined at a trailing `\`, comments dropped.
 */
export function wxhooksCommands(body: string, env: Record<string, string | undefined> = {}): string[][] {
  const lines = body.replace(/\\\n\s*/g, ' ').split('\n');
  const commands: string[][] = [];
  for (const line of lines) {
    let current: string[] = [];
    const flush = () => {
      if (current[0] === 'wxhooks') commands.push(current.slice(1));
      current = [];
    };
    for (const w of words(line, env)) {
      if (OPERATORS.has(w)) flush();
      else if (current.length === 0 && /^\w+=/.test(w))
        continue; // VAR=value before a command
      else current.push(w);
    }
    flush();
  }
  return commands;
}

/** Replaces, in every word, each key of `swaps` with its value (a fixed port with a free one, the app's address with a test's). */
export function swapped(args: string[], swaps: Record<string, string>): string[] {
  return args.map((a) => Object.entries(swaps).reduce((s, [from, to]) => s.split(from).join(to), a));
}

/** A GitHub heading anchor: lower case, punctuation dropped, spaces as hyphens. */
export function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a Markdown text's headings, as GitHub makes them (a repeated one gets -1, -2). */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (/^```/.test(line)) fenced = !fenced;
    const h = !fenced && /^#{1,6} (.+)$/.exec(line);
    if (!h) continue;
    const base = anchorOf(h[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n ? `${base}-${n}` : base);
  }
  return out;
}
