// A worker of a sink's stream (Node): node examples/consumer.js (listen --sink writes the stream)
import { MessageRefusedError, openStore, Webhooks } from 'wxhooks';

const webhooks = new Webhooks({
  secret: process.env.WX_WEBHOOK_SECRET,
  // shared by every worker (and by `listen --store` on the same database): a handler runs once per pair
  store: process.env.DATABASE_URL ? await openStore(process.env.DATABASE_URL) : undefined,
});

webhooks.on('forecast_hour.available', async (event) => {
  const { model, initialization_time, forecast_hour } = event.payload.data;
  if (model !== 'wm-6') throw new MessageRefusedError(`this worker takes wm-6, not ${model}`); // to the dead letters at once
  console.log(`forecast ${model} ${initialization_time} +${forecast_hour}h ready (${event.id})`); // a throw here: onError, delivered again
});
webhooks.onError((error) => console.error(`failed, delivered again later: ${error.message}`));

const worker = await webhooks.consume(process.env.SINK_URL ?? 'nats://127.0.0.1:4222/wxhooks.deliveries', {
  group: 'ingest', // workers of one group share the messages; each group gets every one
  concurrency: 16, // at once in this worker (default 16)
  retryDelayMs: 10_000, // a failed message is delivered again after this (default 10 s)
  maxDeliveries: 5, // then it goes to the dead letters, with why (default 5)
  claimTimeoutMs: 60_000, // a worker that died loses its messages to another after this (default 60 s)
  handlerTimeoutMs: 120_000, // a handler still running then is given up on: onError, delivered again (default 120 s)
  onEvent: (e) => e.outcome !== 'accepted' && console.log(e.outcome, e.key ?? e.id, e.reason ?? ''),
});
// nothing more is taken; the handlers under way finish, or after 20 s are given up on and their messages given back
process.once('SIGTERM', () => void worker.stop({ timeoutMs: 20_000 }));
