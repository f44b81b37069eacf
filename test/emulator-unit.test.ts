import { describe, expect, it } from 'vitest';
import { filtersMatch } from '../src/emulator/deliveries.js';
import { syntheticResponse } from '../src/emulator/responses.js';

const event = { type: 'forecast_hour.available', model: 'wm-6', initialization_time: '2026-11-21T12:00:00Z', forecast_hour: 6 };

describe('filters', () => {
  it('model as a string or a list, hours as H:MM (leading zero or not), event types', () => {
    expect(filtersMatch({}, event)).toBe(true);
    expect(filtersMatch({ model: 'wm-6' }, event)).toBe(true);
    expect(filtersMatch({ model: ['wm-5', 'wm-6'] }, event)).toBe(true);
    expect(filtersMatch({ model: 'wm-5' }, event)).toBe(false);
    expect(filtersMatch({ initialization_time_hours: ['12:00'] }, event)).toBe(true);
    expect(filtersMatch({ initialization_time_hours: ['0:00', '6:00'] }, event)).toBe(false);
    expect(filtersMatch({ initialization_time_hours: ['06:00'] }, { ...event, initialization_time: '2026-11-21T06:00:00Z' })).toBe(true);
    expect(filtersMatch({ event_type: ['heatwave'] }, { ...event, event_type: 'heatwave' })).toBe(true);
    expect(filtersMatch({ event_type: ['heatwave'] }, { ...event, event_type: 'front' })).toBe(false);
    expect(filtersMatch({ event_type: ['heatwave'] }, event)).toBe(false);
  });
});

describe('synthetic responses', () => {
  it('gives each response type a small plausible body, the same for the same trigger', () => {
    const gridded = syntheticResponse({ type: 'gridded' }, event, 'trg_1');
    expect(gridded).toMatchObject({ type: 'gridded', model: 'wm-6', forecast_hour: 6, valid_time: '2026-11-21T18:00:00Z', units: 'K' });
    const values = (gridded.values as number[][]).flat();
    expect(values.every((v) => v > 250 && v < 320)).toBe(true);
    expect(syntheticResponse({ type: 'gridded' }, event, 'trg_1')).toEqual(gridded);
    const points = syntheticResponse({ type: 'interpolated_point_forecast', options: { coordinates: '37.77,-122.42;40.7,-74.0', include_distribution: true } }, event, 't');
    expect((points.points as { lat: number; series: object[] }[]).map((p) => p.lat)).toEqual([37.77, 40.7]);
    expect((points.points as { series: Record<string, unknown>[] }[])[0]!.series[0]).toHaveProperty('temperature_2m_p90');
    expect(syntheticResponse({ type: 'tropical_cyclone_track' }, event, 't').cyclones).toHaveLength(1);
    expect((syntheticResponse({ type: 'degree_days' }, event, 't').days as unknown[]).length).toBe(3);
    expect(syntheticResponse({ type: 'event_context', options: { coordinates: '35,-129' } }, { ...event, event_type: 'heatwave' }, 't')).toMatchObject({ event_type: 'heatwave' });
    expect(syntheticResponse({ type: 'mystery' }, event, 't').note).toContain('no synthetic response');
  });
});
