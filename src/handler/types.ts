import type { RESPONSE_TYPES, SUBSCRIPTION_TYPES } from '../vocabulary.js';

/**
 * The payload of each delivery type and of each response type, as SERVICE.md and the live service give
 * them (the fields beyond the identifiers and `data.response` are what the service is known to send;
 * the emulator sends the same). Checked against src/vocabulary.ts below, so that a type added there and
 * not here, or here and not there, fails the build.
 */

/** A delivery type of the service (`type` of a payload). */
export type DeliveryType = (typeof SUBSCRIPTION_TYPES)[number];
/** A response type of `response_options` (`data.response.type`). */
export type ResponseType = (typeof RESPONSE_TYPES)[number];

/** What every response carries. */
interface ResponseBase {
  model: string;
  /** ISO 8601, UTC: `2026-11-21T06:00:00Z`. */
  initialization_time: string;
}

export interface GriddedResponse extends ResponseBase {
  type: 'gridded';
  forecast_hour: number;
  valid_time: string;
  variable: string;
  units: string;
  latitudes: number[];
  longitudes: number[];
  /** values[i][j] at latitudes[i], longitudes[j]; null where there is no value. */
  values: (number | null)[][];
}

export interface PointSeriesEntry {
  valid_time: string;
  [variable: string]: number | string;
}

export interface InterpolatedPointForecastResponse extends ResponseBase {
  type: 'interpolated_point_forecast';
  points: { lat: number; lon: number; series: PointSeriesEntry[] }[];
}

export interface EventContextResponse extends ResponseBase {
  type: 'event_context';
  event_type: string;
  locations: { lat: number; lon: number; affected: boolean; intensity: number }[];
}

export interface TropicalCycloneTrackResponse extends ResponseBase {
  type: 'tropical_cyclone_track';
  cyclones: { name: string; track: { valid_time: string; lat: number; lon: number; max_wind_ms: number; min_pressure_hpa: number }[] }[];
}

export interface DegreeDaysResponse extends ResponseBase {
  type: 'degree_days';
  base_temperature_c: number;
  days: { date: string; heating_degree_days: number; cooling_degree_days: number }[];
}

/** Each response type's payload, by its `type`. */
export interface ResponseOfType {
  gridded: GriddedResponse;
  interpolated_point_forecast: InterpolatedPointForecastResponse;
  event_context: EventContextResponse;
  tropical_cyclone_track: TropicalCycloneTrackResponse;
  degree_days: DegreeDaysResponse;
}

/** A response of any known type: `response.type` narrows it. */
export type ForecastResponse = ResponseOfType[ResponseType];

interface DataBase {
  model: string;
  initialization_time: string;
  /** Present when the subscription has `response_options`. */
  response?: ForecastResponse;
}

/** Each delivery type's `data`, by the payload's `type`. */
export interface DataOfType {
  'initialization_time.available': DataBase;
  'forecast_hour.available': DataBase & { forecast_hour: number };
  'degree_days.available': DataBase;
  'tropical_cyclones.available': DataBase;
  'events.available': DataBase & { event_type: string };
}

/** The body of a delivery of type T. */
export interface Payload<T extends DeliveryType = DeliveryType> {
  type: T;
  /** A string in the documented shape, an integer from the live service. */
  webhook_id: string | number;
  subscription_id: string | number;
  trigger_id: string;
  created_at: string;
  /** True for a test delivery (a ping). */
  test: boolean;
  /** True for a catch-up built from the forecast API (`reconcile --catch-up`, `webhooks.catchUp`), not a delivery of the service's. */
  catch_up?: true;
  data: DataOfType[T];
}

/** One verified delivery, as a handler receives it. */
export interface WebhookEventOf<T extends DeliveryType> {
  /** The payload's type. */
  type: T;
  /** The dedupe key's trigger (the Trigger-Id when the layout signs it, else the body's trigger_id, else a hash). */
  id: string;
  /** The dedupe key's subscription id, as text. */
  subscriptionId: string;
  payload: Payload<T>;
  /** How it was signed. */
  signature: { layout: string; timestamp: number; triggerId: string; secretIndex: number };
  /**
   * Set when this is a replay (the inspector's "Replay", MCP's `replay_delivery`, `wxhooks deliveries
   * replay`) that carries the replay's signed mark: `id` is the replay's own (and `event.id`: each replay
   * is processed once), `of` the trigger id of the delivery it replays.
   */
  replay?: { id: string; of: string };
  /** A catch-up built from the forecast API (`webhooks.catchUp`, `reconcile --catch-up`): handled once with the service's own delivery of the same forecast, whichever came first. */
  catchUp?: true;
}

/** A verified delivery of any known type: `event.type` narrows `event.payload`. */
export type WebhookEvent = { [T in DeliveryType]: WebhookEventOf<T> }[DeliveryType];

// ---- checked against the vocabulary: each side names exactly the types of the other (a build error otherwise)
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Assert<T extends true> = T;
/** @internal The check itself: never used, it only has to compile. */
export type VocabularyChecked = [Assert<Same<keyof DataOfType, DeliveryType>>, Assert<Same<keyof ResponseOfType, ResponseType>>, Assert<Same<ForecastResponse['type'], ResponseType>>];
