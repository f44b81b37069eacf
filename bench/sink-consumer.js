// A worker of a sink's consumer group for `npm run bench` (sinks): reads with a handler that does nothing,
// and writes how many it has handled so far, one line per turn of the event loop in which it handled some.
// argv: URL GROUP CONCURRENCY. SIGTERM: stops, then exits.
import { consume } from '../dist/sinks/index.js';

const [url, group, concurrency] = process.argv.slice(2);
let handled = 0;
let queued = false;
const consumer = await consume(url, {
  group,
  concurrency: Number(concurrency),
  handler: () => {
    handled++;
    if (!queued) {
      queued = true;
      setImmediate(() => {
        queued = false;
        process.stdout.write(`${handled}\n`);
      });
    }
  },
});
process.stdout.write('ready\n');
process.on('SIGTERM', async () => {
  await consumer.stop();
  process.exit(0);
});
