// The two forecasts drawn by hand on a canvas (a line or bar chart is uPlot's; a heat map and a storm track
// on latitude/longitude axes are not what it draws). Each chart's code is its own.

const FONT = '11px system-ui, sans-serif';

const degrees = (value: number, positive: string, negative: string) => `${Math.abs(value)}°${value >= 0 ? positive : negative}`;

/** Blue (cold) to red (warm), for a value's place between the smallest and the largest. */
function colour(t: number): string {
  const hue = 240 - 240 * Math.max(0, Math.min(1, t));
  return `hsl(${hue}, 75%, 50%)`;
}

function canvas(width: number, height: number): [HTMLCanvasElement, CanvasRenderingContext2D] {
  const c = document.createElement('canvas');
  c.width = width;
  c.height = height;
  const g = c.getContext('2d')!;
  g.font = FONT;
  g.fillStyle = '#fff';
  g.fillRect(0, 0, width, height);
  return [c, g];
}

/** A gridded field as a heat map: a cell per grid point, latitude and longitude axes in degrees, and a colour scale. */
export function drawGridded(r: { latitudes: number[]; longitudes: number[]; values: number[][]; units?: string; variable?: string }): HTMLCanvasElement {
  const rowsN = r.values.length;
  const colsN = Math.max(...r.values.map((row) => row.length));
  const cell = Math.max(8, Math.min(60, Math.floor(420 / Math.max(colsN, rowsN))));
  const left = 56;
  const top = 20;
  const [c, g] = canvas(left + colsN * cell + 110, top + rowsN * cell + 40);
  const all = r.values.flat().filter(Number.isFinite);
  const min = Math.min(...all);
  const max = Math.max(...all);
  r.values.forEach((row, i) =>
    row.forEach((v, j) => {
      g.fillStyle = Number.isFinite(v) ? colour(max === min ? 0.5 : (v - min) / (max - min)) : '#ccc';
      g.fillRect(left + j * cell, top + i * cell, cell, cell);
    }),
  );
  g.fillStyle = '#1d2430';
  g.textAlign = 'right';
  g.textBaseline = 'middle';
  r.latitudes.forEach((lat, i) => g.fillText(degrees(lat, 'N', 'S'), left - 4, top + i * cell + cell / 2));
  g.textAlign = 'center';
  g.textBaseline = 'top';
  r.longitudes.forEach((lon, j) => g.fillText(degrees(lon, 'E', 'W'), left + j * cell + cell / 2, top + rowsN * cell + 4));
  g.textAlign = 'left';
  g.fillText(`${r.variable ?? ''} (${r.units ?? ''})`, left, 4);
  // the colour scale
  const x = left + colsN * cell + 20;
  const h = rowsN * cell;
  for (let k = 0; k < h; k++) {
    g.fillStyle = colour(1 - k / h);
    g.fillRect(x, top + k, 14, 1);
  }
  g.fillStyle = '#1d2430';
  g.textBaseline = 'middle';
  g.fillText(String(max), x + 18, top + 4);
  g.fillText(String(min), x + 18, top + h - 4);
  c.dataset.min = String(min);
  c.dataset.max = String(max);
  return c;
}

/** Storm tracks on latitude/longitude axes: each position a point, joined in time order, labelled with its time. */
export function drawTrack(cyclones: { name?: string; track: { lat: number; lon: number; valid_time: string }[] }[]): HTMLCanvasElement {
  const points = cyclones.flatMap((cy) => cy.track);
  const [w, h, pad] = [520, 320, 44];
  const [c, g] = canvas(w, h);
  const lats = points.map((p) => p.lat);
  const lons = points.map((p) => p.lon);
  const [latMin, latMax] = [Math.floor(Math.min(...lats)) - 1, Math.ceil(Math.max(...lats)) + 1];
  const [lonMin, lonMax] = [Math.floor(Math.min(...lons)) - 1, Math.ceil(Math.max(...lons)) + 1];
  const px = (lon: number) => pad + ((lon - lonMin) / (lonMax - lonMin)) * (w - 2 * pad);
  const py = (lat: number) => h - pad - ((lat - latMin) / (latMax - latMin)) * (h - 2 * pad);
  g.strokeStyle = '#dde1e7';
  g.fillStyle = '#69758a';
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
  g.textAlign = 'left';
  for (const cy of cyclones) {
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
      g.fillStyle = '#1d2430';
      g.fillText(p.valid_time.slice(5, 13).replace('T', ' '), px(p.lon) + 6, py(p.lat) - 6);
    }
    if (cy.name && cy.track[0]) g.fillText(cy.name, px(cy.track[0].lon) + 6, py(cy.track[0].lat) + 14);
  }
  return c;
}
