import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { expect, it } from 'vitest';

// Every handler example (examples/, which docs/library.md shows word for word: test/full/runtimes.e2e.test.ts) is
// compiled by the type checker as a user's `tsc --strict` would check it (checkJs), against the package
// as built (`wxhooks` and `wxhooks/web` resolved through package.json's exports to dist/*.d.ts).

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

it('the handler examples compile with tsc --strict: what a user copies type-checks', () => {
  const files = readdirSync(`${ROOT}examples`)
    .filter((f) => f.endsWith('.js'))
    .map((f) => `${ROOT}examples/${f}`);
  expect(files.length).toBeGreaterThanOrEqual(6);
  const program = ts.createProgram([...files, `${ROOT}test/fixtures/runtimes.d.ts`], {
    strict: true,
    allowJs: true,
    checkJs: true,
    noEmit: true,
    skipLibCheck: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    types: ['node'],
  });
  const problems = ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file ? `${d.file.fileName.replace(ROOT, '')}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}` : '';
    return `${where} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
  expect(problems).toEqual([]);
}, 120_000); // ~6 s of CPU (Express's and Fastify's types), more on a busy machine
