// Deno: deno run --allow-env --allow-net examples/deno.js
import { Webhooks, createWebHandler } from 'wxhooks/web';

const webhooks = new Webhooks({
  secrets: [Deno.env.get('WX_WEBHOOK_SECRET'), Deno.env.get('WX_WEBHOOK_SECRET_OLD')].filter((s) => s !== undefined),
});

webhooks.on('forecast_hour.available', async (event) => {
  const { model, initialization_time, forecast_hour } = event.payload.data;
  if (typeof forecast_hour !== 'number') throw new Error(`${event.id} has no forecast_hour`);
  console.log(`forecast ${model} ${initialization_time} +${forecast_hour}h ready (${event.id})`);
});
webhooks.onError((error) => console.error(`failed, the service will retry: ${error.message}`));

Deno.serve({ hostname: '127.0.0.1', port: Number(Deno.env.get('PORT') ?? 8000) }, createWebHandler(webhooks, { path: '/webhooks' }));
