import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

// The layers of src/ (docs/architecture.md): a file imports files of its own folder, and of the layers
// below its own, never one above, and no files import each other in a circle. Read from the code's own
// imports (static, dynamic and type-only), so that the rule cannot drift from the code.

const SRC = join(import.meta.dirname, '../src');

/** Each layer, from the top: what it holds, by folder or file under src/. A layer imports only those below it. */
const LAYERS: string[][] = [
  ['help.ts'],
  ['cli.ts'],
  ['commands'],
  ['output', 'mcp'],
  ['tasks', 'page'],
  ['receiver', 'index.ts'],
  ['handler', 'relay'],
  ['store', 'emulator', 'context.ts', 'observe'],
  ['api', 'sinks', 'flags'],
  ['delivery'],
  ['signing', 'util'],
  ['errors.ts', 'vocabulary.ts', 'version.ts'],
];

/** The part of src/ a file is in: its folder, or itself at the top of src/. */
const partOf = (file: string) => relative(SRC, file).split('/')[0]!;
const depth = (part: string) => LAYERS.findIndex((l) => l.includes(part));

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

/** The project files a source imports: `from '…'`, `import('…')` and `export … from '…'`, relative ones only. */
function importsOf(file: string, text: string): string[] {
  const code = text.replace(/^\s*(\/\/|\*|\/\*).*$/gm, '');
  return [...code.matchAll(/(?:from\s+|import\s*\(\s*)'(\.{1,2}\/[^']+)'/g)].map((m) => resolve(dirname(file), m[1]!.replace(/\.js$/, '.ts')));
}

/** Imports that go up a layer, or across to another part of the same layer. */
function upward(graph: Map<string, string[]>): string[] {
  const out: string[] = [];
  for (const [from, tos] of graph) {
    for (const to of tos) {
      const [a, b] = [partOf(from), partOf(to)];
      if (a !== b && depth(a) >= depth(b)) out.push(`${relative(SRC, from)} -> ${relative(SRC, to)}`);
    }
  }
  return out;
}

/** The files that import each other in a loop (Tarjan's strongly connected components of more than one file, or a file that imports itself). */
function circles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        on.delete(w);
        component.push(relative(SRC, w));
      } while (w !== v);
      if (component.length > 1 || graph.get(v)?.includes(v)) out.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return out;
}

describe('the layers of src/', () => {
  const files = sources(SRC).filter((f) => !f.endsWith('.d.ts'));
  const graph = new Map(files.map((f) => [f, importsOf(f, readFileSync(f, 'utf8'))]));

  it('every part of src/ is in a layer', () => {
    expect([...new Set(files.map(partOf))].filter((p) => depth(p) === -1)).toEqual([]);
  });

  it('no import goes up a layer, or across to another part of the same layer', () => {
    expect(upward(graph)).toEqual([]);
  });

  it('no files import each other in a circle', () => {
    expect(circles(graph)).toEqual([]);
  });

  it('finds them when there are (the checks can fail)', () => {
    const at = (p: string) => join(SRC, p);
    const bad = new Map([
      [at('delivery/a.ts'), [at('receiver/b.ts')]],
      [at('receiver/b.ts'), [at('delivery/a.ts')]],
      [at('output/c.ts'), [at('mcp/d.ts')]],
    ]);
    expect(upward(bad)).toEqual(['delivery/a.ts -> receiver/b.ts', 'output/c.ts -> mcp/d.ts']);
    expect(circles(bad)).toEqual([['delivery/a.ts', 'receiver/b.ts']]);
    expect(importsOf(at('x/y.ts'), "import type { A } from '../z/a.js';\nconst m = await import('./m.js');\n// import { no } from '../n.js'")).toEqual([at('z/a.ts'), at('x/m.ts')]);
  });
});
