// The two forecasts drawn by hand on a canvas (a line or bar chart is uPlot's; a heat map and a storm track
// on latitude/longitude axes are not what it draws). Each chart's code is its own. A chart that cannot be
// drawn from what came throws a ChartProblem, whose message the page shows in one line in its place.

const FONT = '11px system-ui, sans-serif';
const INK = '#1d2430';
const MUTED = '#4f5a6d';

/** What a response lacks to be drawn, in words. */
export class ChartProblem extends Error {}

const degrees = (value: number, positive: string, negative: string) => `${Math.abs(value)}°${value >= 0 ? positive : negative}`;

/** Blue (cold) to red (warm), for a value's place between the smallest and the largest. */
function colour(t: number): string {
  const hue = 240 - 240 * Math.max(0, Math.min(1, t));
  return `hsl(${hue}, 75%, 50%)`;
}

function canvas(width: number, height: number, label: string): [HTMLCanvasElement, CanvasRenderingContext2D] {
  const c = document.createElement('canvas');
  c.width = width;
  c.height = height;
  c.setAttribute('role', 'img');
  c.setAttribute('aria-label', label);
  const g = c.getContext('2d')!;
  g.font = FONT;
  g.fillStyle = '#fff';
  g.fillRect(0, 0, width, height);
  c.style.maxWidth = '100%';
  return [c, g];
}

const isNumberList = (v: unknown): v is number[] => Array.isArray(v) && v.every((x) => typeof x === 'number');

/** At most this many cells a side are drawn: a larger grid is drawn every Nth row and column. */
const MOST_CELLS = 200;

/**
 * A gridded field as a heat map: a cell per grid point (every Nth of a grid over MOST_CELLS a side),
 * latitude and longitude axes in degrees (the row and column numbers when the response has none), and a
 * colour scale. Loops, not spreads: a 400 × 400 grid is 160,000 values, past what a call may take.
 */
export function drawGridded(r: Record<string, unknown>): HTMLCanvasElement {
  if (!Array.isArray(r.values) || !r.values.length || !r.values.every(Array.isArray)) throw new ChartProblem('no grid to draw: "values" is not a list of rows of numbers');
  const values = r.values as unknown[][];
  const rowsN = values.length;
  let colsN = 0;
  for (const row of values) colsN = Math.max(colsN, row.length);
  const lats = isNumberList(r.latitudes) && r.latitudes.length === rowsN ? r.latitudes : undefined;
  const lons = isNumberList(r.longitudes) && r.longitudes.length === colsN ? r.longitudes : undefined;
  const step = Math.max(1, Math.ceil(Math.max(rowsN, colsN) / MOST_CELLS));
  const shownRows = Math.ceil(rowsN / step);
  const shownCols = Math.ceil(colsN / step);
  const cell = Math.max(2, Math.min(60, Math.floor(420 / Math.max(shownCols, shownRows))));
  const left = 60;
  const top = 22;
  const [c, g] = canvas(left + shownCols * cell + 110, top + shownRows * cell + 42, `heat map of ${String(r.variable ?? 'the field')}, ${rowsN} by ${colsN}`);
  let min = Infinity;
  let max = -Infinity;
  for (const row of values) for (const v of row) if (typeof v === 'number' && Number.isFinite(v)) (min = Math.min(min, v)), (max = Math.max(max, v));
  if (min === Infinity) throw new ChartProblem('no grid to draw: the grid holds no number');
  for (let i = 0; i < rowsN; i += step) {
    const row = values[i]!;
    for (let j = 0; j < colsN; j += step) {
      const v = row[j];
      g.fillStyle = typeof v === 'number' && Number.isFinite(v) ? colour(max === min ? 0.5 : (v - min) / (max - min)) : '#ccc';
      g.fillRect(left + (j / step) * cell, top + (i / step) * cell, cell, cell);
    }
  }
  g.fillStyle = INK;
  g.textAlign = 'right';
  g.textBaseline = 'middle';
  const every = Math.max(1, Math.ceil(14 / cell)); // a label at least every 14 px
  for (let i = 0; i < shownRows; i += every) g.fillText(lats ? degrees(lats[i * step]!, 'N', 'S') : String(i * step), left - 4, top + i * cell + cell / 2);
  g.textAlign = 'center';
  g.textBaseline = 'top';
  const everyCol = Math.max(1, Math.ceil(40 / cell));
  for (let j = 0; j < shownCols; j += everyCol) g.fillText(lons ? degrees(lons[j * step]!, 'E', 'W') : String(j * step), left + j * cell + cell / 2, top + shownRows * cell + 4);
  g.textAlign = 'left';
  const nth = step === 2 ? 'every 2nd' : step === 3 ? 'every 3rd' : `every ${step}th`;
  const notes = [step > 1 ? `drawn with ${nth} row and column of ${rowsN} × ${colsN}` : '', lats && lons ? '' : 'no latitudes or longitudes: rows and columns numbered'].filter(Boolean).join('; ');
  const title = [r.variable, r.units === undefined ? undefined : `(${String(r.units)})`]
    .filter((x) => x !== undefined && x !== '')
    .map(String)
    .join(' ');
  g.fillText([title, notes].filter(Boolean).join('  '), left, 4);
  // the colour scale
  const x = left + shownCols * cell + 20;
  const h = shownRows * cell;
  for (let k = 0; k < h; k++) {
    g.fillStyle = colour(1 - k / h);
    g.fillRect(x, top + k, 14, 1);
  }
  g.fillStyle = INK;
  g.textBaseline = 'middle';
  g.fillText(String(max), x + 18, top + 4);
  g.fillText(String(min), x + 18, top + h - 4);
  c.dataset.min = String(min);
  c.dataset.max = String(max);
  c.dataset.step = String(step);
  if (notes) c.dataset.note = `${notes.charAt(0).toUpperCase()}${notes.slice(1)}.`;
  return c;
}

interface TrackPoint {
  lat: number;
  lon: number;
  valid_time: string;
}

/**
 * Storm tracks on latitude/longitude axes: each position a point, joined in time order, labelled with
 * its time (`time` writes it, in the page's time zone). A label is put left of its point near the right
 * edge, so none is cut.
 */
export function drawTrack(cyclones: unknown, time: (iso: string) => string): HTMLCanvasElement {
  const list = (Array.isArray(cyclones) ? cyclones : []) as { name?: unknown; track?: unknown }[];
  const tracks = list.map((cy) => ({
    name: typeof cy.name === 'string' ? cy.name : undefined,
    track: (Array.isArray(cy.track) ? cy.track : []).filter((p: TrackPoint) => typeof p?.lat === 'number' && typeof p?.lon === 'number') as TrackPoint[],
  }));
  const points = tracks.flatMap((cy) => cy.track);
  if (!points.length) throw new ChartProblem('no track to draw: no cyclone has positions with lat and lon');
  const [w, h, pad] = [560, 320, 44];
  const [c, g] = canvas(w, h, `track of ${tracks.length} cyclone${tracks.length === 1 ? '' : 's'}`);
  let [latMin, latMax, lonMin, lonMax] = [Infinity, -Infinity, Infinity, -Infinity];
  for (const p of points) [latMin, latMax, lonMin, lonMax] = [Math.min(latMin, p.lat), Math.max(latMax, p.lat), Math.min(lonMin, p.lon), Math.max(lonMax, p.lon)];
  [latMin, latMax, lonMin, lonMax] = [Math.floor(latMin) - 1, Math.ceil(latMax) + 1, Math.floor(lonMin) - 1, Math.ceil(lonMax) + 1];
  const px = (lon: number) => pad + ((lon - lonMin) / (lonMax - lonMin)) * (w - 2 * pad);
  const py = (lat: number) => h - pad - ((lat - latMin) / (latMax - latMin)) * (h - 2 * pad);
  g.strokeStyle = '#dde1e7';
  g.fillStyle = MUTED;
  g.textAlign = 'center';
  for (let lon = lonMin; lon <= lonMax; lon += Math.max(1, Math.round((lonMax - lonMin) / 6))) {
    g.beginPath();
    g.moveTo(px(lon), pad);
    g.lineTo(px(lon), h - pad);
    g.stroke();
    g.fillText(degrees(lon, 'E', 'W'), px(lon), h - pad + 14);
  }
  g.textAlign = 'right';
  for (let lat = latMin; lat <= latMax; lat += Math.max(1, Math.round((latMax - latMin) / 5))) {
    g.beginPath();
    g.moveTo(pad, py(lat));
    g.lineTo(w - pad, py(lat));
    g.stroke();
    g.fillText(degrees(lat, 'N', 'S'), pad - 4, py(lat) + 4);
  }
  /** A label beside a point, on whichever side keeps it inside the canvas. */
  const label = (text: string, x: number, y: number) => {
    const width = g.measureText(text).width;
    const right = x + 6 + width <= w - 2;
    g.textAlign = right ? 'left' : 'right';
    g.fillText(text, right ? x + 6 : x - 6, Math.max(10, Math.min(h - 4, y)));
  };
  for (const cy of tracks) {
    g.strokeStyle = '#b42318';
    g.lineWidth = 2;
    g.beginPath();
    cy.track.forEach((p, i) => (i ? g.lineTo(px(p.lon), py(p.lat)) : g.moveTo(px(p.lon), py(p.lat))));
    g.stroke();
    for (const p of cy.track) {
      g.fillStyle = '#b42318';
      g.beginPath();
      g.arc(px(p.lon), py(p.lat), 4, 0, 2 * Math.PI);
      g.fill();
      g.fillStyle = INK;
      if (typeof p.valid_time === 'string') label(time(p.valid_time), px(p.lon), py(p.lat) - 6);
    }
    if (cy.name && cy.track[0]) label(cy.name, px(cy.track[0].lon), py(cy.track[0].lat) + 14);
  }
  c.dataset.labelsInside = 'true';
  return c;
}
