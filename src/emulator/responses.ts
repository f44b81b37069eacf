import { createHash } from 'node:crypto';
import { isoSeconds } from '../vocabulary.js';

export interface EventData {
  model: string;
  initialization_time: string;
  forecast_hour?: number;
  event_type?: string;
}

/** An event as the emulator publishes it: what it delivers, and what its forecast API records. */
export interface PublishedEvent extends EventData {
  type: string;
}

/** A repeatable pseudo-random stream from a seed, so the same trigger gives the same data. */
function numbers(seed: string): () => number {
  let state = createHash('sha256').update(seed).digest().readUInt32LE(0) || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return ((state >>> 0) % 10_000) / 10_000;
  };
}

const round = (n: number, d = 2) => Math.round(n * 10 ** d) / 10 ** d;

function coordinates(options: Record<string, unknown> | undefined, fallback: string): { lat: number; lon: number }[] {
  const text = typeof options?.coordinates === 'string' ? options.coordinates : fallback;
  return text
    .split(';')
    .map((pair) => pair.split(',').map(Number))
    .filter((p) => p.length === 2 && p.every(Number.isFinite))
    .map(([lat, lon]) => ({ lat: lat!, lon: lon! }));
}

function validTime(e: EventData, plusHours = 0): string {
  return isoSeconds(Date.parse(e.initialization_time) + ((e.forecast_hour ?? 0) + plusHours) * 3_600_000);
}

/**
 * A small, plausible synthetic API response of the type a subscription's
 * `response_options` asks for, as `data.response` of a delivery.
 */
export function syntheticResponse(responseOptions: Record<string, unknown>, event: EventData, seed: string): Record<string, unknown> {
  const type = String(responseOptions.type ?? '');
  const options = (responseOptions.options as Record<string, unknown> | undefined) ?? undefined;
  const rnd = numbers(`${seed}:${type}`);
  const base = { type, model: event.model, initialization_time: event.initialization_time };
  switch (type) {
    case 'gridded': {
      const lats = [50, 49.75, 49.5];
      const lons = [8, 8.25, 8.5, 8.75];
      return {
        ...base,
        forecast_hour: event.forecast_hour ?? 0,
        valid_time: validTime(event),
        variable: 'temperature_2m',
        units: 'K',
        latitudes: lats,
        longitudes: lons,
        values: lats.map(() => lons.map(() => round(270 + rnd() * 25))),
      };
    }
    case 'interpolated_point_forecast':
      return {
        ...base,
        points: coordinates(options, '37.77,-122.42').map((c) => ({
          ...c,
          series: [0, 1, 2].map((h) => ({
            valid_time: validTime(event, h),
            temperature_2m: round(10 + rnd() * 15),
            wind_speed_10m: round(rnd() * 12),
            precipitation: round(rnd() * 2),
            ...(options?.include_distribution === true ? { temperature_2m_p10: round(8 + rnd() * 5), temperature_2m_p90: round(18 + rnd() * 5) } : {}),
          })),
        })),
      };
    case 'tropical_cyclones':
    case 'tropical_cyclone_track': {
      let lat = 15 + rnd() * 5;
      let lon = -45 - rnd() * 10;
      return {
        ...base,
        cyclones: [
          {
            name: 'EMU-01',
            track: [0, 12, 24, 36, 48].map((h) => {
              lat += 0.8 + rnd() * 0.5;
              lon -= 1 + rnd();
              return { valid_time: validTime({ ...event, forecast_hour: h }), lat: round(lat), lon: round(lon), max_wind_ms: round(25 + rnd() * 20, 1), min_pressure_hpa: round(990 - rnd() * 30, 0) };
            }),
          },
        ],
      };
    }
    case 'degree_days':
      return {
        ...base,
        base_temperature_c: 18,
        days: [0, 1, 2].map((d) => ({
          date: new Date(Date.parse(event.initialization_time) + d * 86_400_000).toISOString().slice(0, 10),
          heating_degree_days: round(rnd() * 12, 1),
          cooling_degree_days: round(rnd() * 3, 1),
        })),
      };
    case 'event_context':
      return {
        ...base,
        event_type: event.event_type ?? 'heatwave',
        locations: coordinates(options, '35,-129').map((c) => ({ ...c, affected: rnd() > 0.3, intensity: round(rnd(), 2) })),
      };
    default:
      return { ...base, note: `the emulator has no synthetic response of type "${type}"` };
  }
}
