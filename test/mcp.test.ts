import { spawn } from 'node:child_process';
import { chmodSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bytesOf, shownBody } from '../src/mcp/answers.js';
import { KeptHistory, openSavedFolder } from '../src/mcp/kept.js';
import { savedFileBytes, savedMeta } from '../src/receiver/saved.js';
import { announceListen, listenOnPort, runningListens, type RunningListen } from '../src/store/running.js';
import { tempDir } from './helpers/cli.js';
import { signed, TEST_SECRET } from './helpers/receiver.js';

// The MCP server's pieces that need no process: what the binary loads at start, how a body is cut for an
// answer, the record a running listen leaves for `wxhooks mcp`, a --save-dir folder read as a history.

const DIST = new URL('../dist/bin/', import.meta.url);

/** The files a built module imports statically (`import … from "./x.js"`, `import "./x.js"`), all the way down: what loads with it. */
function staticClosure(entry: string): Set<string> {
  const seen = new Set<string>();
  const visit = (name: string) => {
    if (seen.has(name)) return;
    seen.add(name);
    const text = readFileSync(new URL(name, DIST), 'utf8');
    for (const m of text.matchAll(/(?:^|[;\n])\s*import\s*(?:[\w$*{},\s]+?\s*from\s*)?["']\.\/([^"']+)["']/g)) visit(m[1]!);
  };
  visit(entry);
  return seen;
}

const holdsSdk = (name: string) => /\bStdioServerTransport\d* = class\b|\bclass StdioServerTransport\b/.test(readFileSync(new URL(name, DIST), 'utf8'));

describe('start-up', () => {
  it('`wxhooks --version` (and every command but mcp) loads nothing of the MCP SDK: it is imported only when `wxhooks mcp` runs', () => {
    const atStart = staticClosure('cli.js');
    expect(atStart.size).toBeGreaterThan(1);
    expect([...atStart].filter(holdsSdk)).toEqual([]);
    // the SDK is in the build, reached only by an import() of the mcp command's run
    const withSdk = readdirSync(DIST).filter((n) => n.endsWith('.js') && holdsSdk(n));
    expect(withSdk.length).toBeGreaterThan(0);
    const command = readdirSync(DIST).find((n) => /^mcp-[\w-]+\.js$/.test(n))!; // src/commands/mcp.ts
    expect([...staticClosure(command)].filter(holdsSdk)).toEqual([]);
  });
});

describe('a body in an answer', () => {
  it('is shown whole as text when it fits, with its size', () => {
    expect(shownBody(Buffer.from('{"a":1}'), 7, 100)).toEqual({ body: '{"a":1}', size: 7, shown: 7, cut: null });
  });

  it("is cut at the caller's limit, never inside a character, and says so", () => {
    const body = Buffer.from('{"city":"Zürich"}'); // ü is two bytes
    const at = body.indexOf('ü') + 1; // a limit that would split it
    expect(shownBody(body, body.length, at)).toEqual({ body: '{"city":"Z', size: body.length, shown: at - 1, cut: 'max_body_bytes' });
    const four = Buffer.from('x🌀y'); // a four-byte character
    for (let max = 1; max <= 4; max++) expect(shownBody(four, four.length, max)).toMatchObject({ body: 'x', shown: 1 });
    expect(shownBody(four, four.length, 5)).toMatchObject({ body: 'x🌀', shown: 5 });
  });

  it('is base64 when it is not UTF-8, cut at the limit', () => {
    const bytes = Buffer.from([0xff, 0xfe, 0x00, 0x41, 0x42]);
    expect(shownBody(bytes, 5, 100)).toEqual({ body_base64: bytes.toString('base64'), size: 5, shown: 5, cut: null });
    expect(shownBody(bytes, 5, 3)).toEqual({ body_base64: bytes.subarray(0, 3).toString('base64'), size: 5, shown: 3, cut: 'max_body_bytes' });
  });

  it('kept in part by the history: what is kept, its whole size, and that it is only the start', () => {
    const kept = Buffer.from('{"data":"ab'); // the first 11 of 20 bytes
    expect(shownBody(kept, 20, 16 * 1024)).toEqual({ body: '{"data":"ab', size: 20, shown: 11, cut: 'kept_in_part' });
    expect(bytesOf({ body_base64: 'AAE=' })).toEqual(Buffer.from([0, 1]));
  });
});

describe('the record of a running listen', () => {
  const record = (pid: number, started: string, port = 8787): RunningListen => ({
    pid,
    host: '127.0.0.1',
    port,
    receiver: `http://127.0.0.1:${port}/`,
    inspector: null,
    forward_to: null,
    webhook_id: '7',
    base_url: null,
    started,
  });

  it('is written while listen runs, given its inspector when that starts, and removed when it stops', async () => {
    const dir = tempDir();
    const announced = await announceListen(dir, record(process.pid, '2026-11-24T10:00:00.000Z'));
    expect(await runningListens(dir)).toEqual([record(process.pid, '2026-11-24T10:00:00.000Z')]);
    await announced.update({ inspector: 'http://127.0.0.1:8789/' });
    expect(await listenOnPort(dir, 8787)).toEqual({ ...record(process.pid, '2026-11-24T10:00:00.000Z'), inspector: 'http://127.0.0.1:8789/' });
    expect(await listenOnPort(dir, 8788)).toBeUndefined();
    await announced.remove();
    expect(await runningListens(dir)).toEqual([]);
    expect(readdirSync(join(dir, 'running'))).toEqual([]);
  });

  it('of a process that is gone (kill -9) is passed over and removed; the live ones come last started first', async () => {
    const dir = tempDir();
    const dead = spawn(process.execPath, ['-e', '0']);
    await new Promise((r) => dead.once('exit', r));
    const a = await announceListen(dir, record(process.pid, '2026-11-24T10:00:00.000Z'));
    const parent = process.ppid; // alive for as long as this test runs
    const b = await announceListen(dir, record(parent, '2026-11-24T11:00:00.000Z'));
    await announceListen(dir, record(dead.pid!, '2026-11-24T12:00:00.000Z'));
    writeFileSync(join(dir, 'running', 'listen-1.json'), 'not json');
    expect((await runningListens(dir)).map((r) => r.pid)).toEqual([parent, process.pid]);
    expect(existsSync(join(dir, 'running', `listen-${dead.pid}.json`))).toBe(false);
    await a.remove();
    await b.remove();
  });

  it("one others could have written is passed over: its address would be given the inspector's token", async () => {
    const dir = tempDir();
    const a = await announceListen(dir, record(process.pid, '2026-11-24T10:00:00.000Z'));
    chmodSync(join(dir, 'running', `listen-${process.pid}.json`), 0o666);
    expect(await runningListens(dir)).toEqual([]);
    await a.remove();
  });
});

describe('a --save-dir folder as a history', () => {
  const save = (dir: string, n: number) => {
    const d = signed(`trg_saved_${n}`, { data: { model: 'wm-6', initialization_time: '2026-11-24T00:00:00Z', forecast_hour: n * 6 } });
    const saved = savedMeta(`2026-11-24T00:0${n}:00.000Z`, 'POST', '/', d.headers, 'standard');
    writeFileSync(join(dir, `2026-11-24T00-0${n}-00-000Z-trg_saved_${n}.json`), savedFileBytes(saved, d.body, undefined));
  };

  it('reads the newest the limits allow, then each new file, with its run', async () => {
    const dir = tempDir();
    for (let n = 0; n < 4; n++) save(dir, n);
    writeFileSync(join(dir, '0-notes.json'), '{"not":"a delivery"}'); // passed over
    // not marked by a listen of this store: each shows it verified by its signature, with the secret given
    const folder = await openSavedFolder(dir, { rows: 3 }, undefined, [TEST_SECRET]);
    const kept = new KeptHistory(folder.history, { kind: 'save-dir', where: dir, replay_to: null }, undefined, folder);
    expect((await kept.records()).map((r) => r.trigger_id)).toEqual(['trg_saved_1', 'trg_saved_2', 'trg_saved_3']);
    const seen: string[] = [];
    const stop = kept.watch((r) => seen.push(r.trigger_id!));
    save(dir, 5);
    expect((await kept.records()).map((r) => r.trigger_id)).toEqual(['trg_saved_2', 'trg_saved_3', 'trg_saved_5']);
    expect(seen).toEqual(['trg_saved_5']);
    stop();
    expect((await kept.runs()).runs).toEqual([{ model: 'wm-6', initialization_time: '2026-11-24T00:00:00Z', hours: [6, 12, 18, 30], init_event: false }]);
    const one = await kept.one((await kept.records()).at(-1)!.id);
    expect(one?.record).toMatchObject({ outcome: 'accepted', layout: 'standard', saved_to: join(dir, '2026-11-24T00-05-00-000Z-trg_saved_5.json') });
    await expect(kept.replay(one!.record.id)).rejects.toThrow(/Nowhere to replay to/);
    await kept.close();
  });

  it('that cannot be read is said before the server starts', async () => {
    await expect(openSavedFolder(join(tempDir(), 'nope'), {}, undefined, [])).rejects.toThrow(/Cannot read the folder/);
  });

  it('a file that shows no mark and no signature of the secret given is listed as not verified, never accepted', async () => {
    const dir = tempDir();
    save(dir, 1);
    const folder = await openSavedFolder(dir, {}, undefined, ['whsec_' + Buffer.alloc(32, 9).toString('base64')]);
    const kept = new KeptHistory(folder.history, { kind: 'save-dir', where: dir, replay_to: null }, undefined, folder);
    expect((await kept.records()).map((r) => r.outcome)).toEqual(['unverified']);
    await kept.close();
  });
});
