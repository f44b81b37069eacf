// Bun: bun run examples/bun.js
import { Webhooks, createWebHandler } from 'wxhooks/web';

const webhooks = new Webhooks({
  secrets: [Bun.env.WX_WEBHOOK_SECRET, Bun.env.WX_WEBHOOK_SECRET_OLD].filter((s) => s !== undefined),
});

webhooks.on('forecast_hour.available', async (event) => {
  const { model, initialization_time, forecast_hour } = event.payload.data;
  if (typeof forecast_hour !== 'number') throw new Error(`${event.id} has no forecast_hour`);
  console.log(`forecast ${model} ${initialization_time} +${forecast_hour}h ready (${event.id})`);
});
webhooks.onError((error) => console.error(`failed, the service will retry: ${error.message}`));

Bun.serve({ hostname: '127.0.0.1', port: Number(Bun.env.PORT ?? 3000), fetch: createWebHandler(webhooks, { path: '/webhooks' }) });
