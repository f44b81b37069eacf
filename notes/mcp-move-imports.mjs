// Rewrites the imports of the files that left src/commands/ (the move of one commit on branch mcp), so
// that it can be redone on any tree: `node notes/mcp-move-imports.mjs` from the repository's root, after
// the files themselves are where they go (git mv, and shared.ts split by name as below). Each named
// import from an old module goes to the module that now holds that name; nothing else is changed.
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const root = process.cwd();
const at = (p) => resolve(root, p);
/** Old module (without .ts) → the new module of each of its names ('*': every name). */
const MOVES = {
  [at('src/commands/options')]: { '*': at('src/flags/options') },
  [at('src/commands/option-types')]: { '*': at('src/flags/option-types') },
  [at('src/commands/doctor-check')]: { '*': at('src/tasks/doctor') },
  [at('src/commands/shared')]: {
    baseUrlFor: at('src/tasks/service'),
    serviceFor: at('src/tasks/service'),
    secretStoreFor: at('src/tasks/secrets'),
    resolveSecrets: at('src/tasks/secrets'),
    SecretSource: at('src/tasks/secrets'),
    secretSourceOptions: at('src/flags/sources'),
    deliverySourceOptions: at('src/flags/sources'),
    warnUnknownTypes: at('src/output/warnings'),
    warnUnknownResponses: at('src/output/warnings'),
  },
};

const files = (dir) => readdirSync(dir).flatMap((n) => (statSync(join(dir, n)).isDirectory() ? (n === 'node_modules' || n === 'page' ? [] : files(join(dir, n))) : /\.tsx?$/.test(n) ? [join(dir, n)] : []));
const spec = (from, to) => {
  const r = relative(dirname(from), to);
  return `${r.startsWith('.') ? r : `./${r}`}.js`;
};

for (const file of [...files(at('src')), ...files(at('test'))]) {
  const text = readFileSync(file, 'utf8');
  let out = text.replace(/^import (type )?\{([^}]*)\} from '(\.[^']+)\.js';$/gm, (whole, typeOnly, names, path) => {
    const moves = MOVES[resolve(dirname(file), path)];
    if (!moves) return whole;
    const by = new Map();
    for (const raw of names.split(',').map((n) => n.trim()).filter(Boolean)) {
      const name = raw.replace(/^type\s+/, '').split(/\s+as\s+/)[0];
      const to = moves[name] ?? moves['*'];
      if (!to) throw new Error(`${file}: where does ${name} of ${path} go?`);
      by.set(to, [...(by.get(to) ?? []), raw]);
    }
    return [...by].map(([to, list]) => `import ${typeOnly ?? ''}{ ${list.join(', ')} } from '${spec(file, to)}';`).join('\n');
  });
  // a lazy import of a whole module (cli.ts's options)
  out = out.replace(/import\('(\.[^']+)\.js'\)/g, (whole, path) => {
    const to = MOVES[resolve(dirname(file), path)]?.['*'];
    return to ? `import('${spec(file, to)}')` : whole;
  });
  if (out !== text) writeFileSync(file, out);
}
