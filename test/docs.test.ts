import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { commandPages, readmeCommands } from '../scripts/docs.js';
import { GROUPS } from '../src/cli.js';
import { EXIT_CODE_WORDS } from '../src/errors.js';
import { renderAllHelp } from '../src/help.js';
import { exportedNames } from './helpers/exports.js';
import { anchors, doc, ROOT, shBlocks } from './helpers/guide.js';

// The documentation is held to the program: the command reference and the README's command list are
// what `npm run docs` makes from the help now; the README's exit codes are src/errors.ts's; every shell
// block of the README and the guides names the test that runs it, or says why none can; every link
// leads somewhere; the library's page has a heading for each name the two entries export.

const README = doc('README.md');
/** The guides: docs/*.md (the command reference, generated, is checked as a whole below). */
const GUIDES = readdirSync(join(ROOT, 'docs'))
  .filter((f) => f.endsWith('.md'))
  .map((f) => `docs/${f}`);

describe('the command reference (docs/commands/, npm run docs)', () => {
  it('every page is what the help renders now: a help text changed without `npm run docs` fails here', async () => {
    const pages = commandPages(await renderAllHelp(), GROUPS);
    const dir = join(ROOT, 'docs/commands');
    expect(readdirSync(dir).sort(), 'the pages in docs/commands/ (run npm run docs)').toEqual([...pages.keys()].sort());
    for (const [file, text] of pages) expect(readFileSync(join(dir, file), 'utf8'), `docs/commands/${file} is stale: run npm run docs`).toBe(text);
  });

  it("the README's command list is GROUPS, one line per group, each linking its page", () => {
    const block = /<!-- generated: commands \(npm run docs\) -->\n([\s\S]*?)\n<!-- end: commands -->/.exec(README);
    expect(block, 'the README has the generated command list').not.toBeNull();
    expect(block![1], "the README's command list is stale: run npm run docs").toBe(readmeCommands(GROUPS));
    expect(block![1]!.split('\n')).toHaveLength(GROUPS.length);
  });

  it("the README's exit codes are src/errors.ts's table: every code, in order, with its word", () => {
    const table = README.slice(README.indexOf('## Exit codes'), README.indexOf('\n## ', README.indexOf('## Exit codes') + 1));
    const rows = [...table.matchAll(/^\| (\d+) \| ([^|]+) \|/gm)].map((m) => [m[1]!, m[2]!.trim()]);
    expect(rows).toEqual(Object.entries(EXIT_CODE_WORDS));
  });
});

describe('the README, a front page', () => {
  it('is at most 300 lines, with install, the quick start and the three roads in its first two screens (100 lines)', () => {
    const lines = README.split('\n');
    expect(lines.length).toBeLessThanOrEqual(300);
    const first = lines.slice(0, 100);
    for (const heading of [
      '## Install',
      '## Quick start',
      '### Receive on your machine and forward to your app',
      '### From the real service to your laptop',
      '### Write your handler with the library',
    ])
      expect(first, heading).toContain(heading);
  });

  it('installs in the order that works: the tarball only after `npm pack` made it', () => {
    const install = shBlocks(README)[0]!.body.split('\n');
    const pack = install.findIndex((l) => l.includes('npm pack'));
    const tarball = install.findIndex((l) => l.includes('./wxhooks-0.1.0.tgz'));
    expect(pack).toBeGreaterThan(-1);
    expect(tarball).toBeGreaterThan(pack);
  });
});

describe('every shell block is run by a test, or says why none can', () => {
  for (const file of ['README.md', ...GUIDES]) {
    it(file, () => {
      const blocks = shBlocks(doc(file));
      for (const b of blocks) {
        const where = `${file}:${b.line}`;
        expect(b.mark, `${where}: a sh block needs <!-- tested: test/x.test.ts --> or <!-- not tested: why --> on the line above it`).toBeDefined();
        if (b.mark && 'tested' in b.mark) {
          const test = b.mark.tested;
          expect(existsSync(join(ROOT, test)), `${where}: ${test} does not exist`).toBe(true);
          expect(readFileSync(join(ROOT, test), 'utf8'), `${where}: ${test} never names ${file}, so it cannot be reading it`).toContain(file);
        }
      }
    });
  }
});

describe('every link leads somewhere', () => {
  for (const file of ['README.md', ...GUIDES, 'DECISIONS.md', 'BENCHMARKS.md']) {
    it(file, () => {
      const text = doc(file);
      const prose = text.replace(/^```[\s\S]*?^```/gm, '');
      for (const [, target] of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        const [path, hash] = target!.split('#') as [string, string | undefined];
        const to = path ? relative(ROOT, resolve(ROOT, dirname(file), path)) : file;
        expect(existsSync(join(ROOT, to)), `${file}: ${target} (${to}) does not exist`).toBe(true);
        if (hash !== undefined && to.endsWith('.md')) expect([...anchors(doc(to))], `${file}: ${target} has no such heading`).toContain(hash);
      }
    });
  }
});

describe('docs/library.md: one heading per exported name of wxhooks and wxhooks/web', () => {
  const names = new Set([...exportedNames('wxhooks'), ...exportedNames('wxhooks/web')]);
  const headings = new Set([...doc('docs/library.md').matchAll(/^#{2,4} `([A-Za-z]+)`$/gm)].map((m) => m[1]!));

  it('each name has its heading (`### `Name``), with its signature and an example below it', () => {
    expect(names.size).toBeGreaterThan(50);
    expect([...names].filter((n) => !headings.has(n)).sort()).toEqual([]);
  });

  it('and no heading names something neither entry exports', () => {
    expect([...headings].filter((h) => !names.has(h)).sort()).toEqual([]);
  });
});

describe('DECISIONS.md and BENCHMARKS.md are references, by topic and by measure', () => {
  for (const file of ['DECISIONS.md', 'BENCHMARKS.md']) {
    it(`${file} speaks of the project, not of working sessions`, () => {
      // (a verifier's session, listen's session id, a client's session are words of the code, and stay)
      expect(doc(file)).not.toMatch(/\bSession\b/);
      expect(doc(file)).not.toMatch(/\bsession \d|\bphase \d|\bas built\b|this round/i);
    });
  }

  it('each measure of BENCHMARKS.md dates its figures', () => {
    const sections = doc('BENCHMARKS.md')
      .split(/\n## /)
      .slice(1)
      .filter((s) => !/^(How to run it|The last run|The last full table)/.test(s));
    for (const section of sections) expect(section, section.split('\n')[0]).toMatch(/\| 2026-\d\d-\d\d/);
  });
});
