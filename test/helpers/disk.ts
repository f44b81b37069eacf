import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from './cli.js';

/**
 * A small disk of its own: a tmpfs of `kib` KiB mounted on a new folder (the test machines run as root,
 * as CI does). `fill()` takes all its free space but `leave` bytes, `free()` gives the space back.
 */
export interface SmallDisk {
  dir: string;
  fill(leave?: number): void;
  free(): void;
  unmount(): void;
}

export function smallDisk(kib: number): SmallDisk {
  if (process.getuid?.() !== 0) throw new Error('the full-disk tests mount a small tmpfs, which needs root (CI runs as root)');
  const dir = tempDir('wxhooks-disk-');
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${kib}k,mode=0700`, 'tmpfs', dir]);
  const filler = join(dir, '.filler');
  const store = join(dir, 'store');
  mkdirSync(store);
  return {
    dir: store,
    fill(leave = 0) {
      // one block at a time, until the disk says no: then give back what is to be left
      const block = Buffer.alloc(4096, 0x2e);
      let written = 0;
      try {
        for (;;) {
          writeFileSync(filler, block, { flag: 'a' });
          written += block.length;
        }
      } catch {
        // full
      }
      if (leave) {
        rmSync(filler, { force: true });
        writeFileSync(filler, Buffer.alloc(Math.max(0, written - leave), 0x2e));
      }
    },
    free() {
      rmSync(filler, { force: true });
    },
    unmount() {
      execFileSync('umount', ['-l', dir]);
    },
  };
}
