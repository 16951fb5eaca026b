// Times and figures in the viewer's time zone. The API writes UTC without a zone
// (`YYYY-MM-DDThh:mm:ss.mmm`, docs/conventions.md) and takes RFC 3339.

export const zone = (Intl.DateTimeFormat().resolvedOptions().timeZone) || 'UTC';

export function parseTs(s) {
  if (!s) return null;
  const str = String(s);
  const d = new Date(/[zZ]|[+-]\d\d:?\d\d$/.test(str) ? str : `${str}Z`);
  return Number.isNaN(d.getTime()) ? null : d;
}

function offsetText(d) {
  const m = -d.getTimezoneOffset();
  const sign = m < 0 ? '−' : '+';
  const a = Math.abs(m);
  return `UTC${sign}${String(Math.floor(a / 60)).padStart(2, '0')}:${String(a % 60).padStart(2, '0')}`;
}

export function zoneLabel() {
  return `${zone} (${offsetText(new Date())})`;
}

const dayFmt = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: 'numeric' });
const timeFmt = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });

// "14:03:22" today, "2 Dec 2026, 14:03:22" on other days.
export function fmtTime(s) {
  const d = s instanceof Date ? s : parseTs(s);
  if (!d) return '–';
  const today = localDay(new Date()) === localDay(d);
  return today ? timeFmt.format(d) : `${dayFmt.format(d)}, ${timeFmt.format(d)}`;
}

// A <time> element: the local text, the exact instant in its datetime attribute.
export function timeEl(s) {
  const d = s instanceof Date ? s : parseTs(s);
  const t = document.createElement('time');
  t.textContent = fmtTime(d);
  if (d) t.dateTime = d.toISOString();
  return t;
}

export function ago(s, now = Date.now()) {
  const d = s instanceof Date ? s : parseTs(s);
  if (!d) return '';
  const sec = Math.round((now - d.getTime()) / 1000);
  if (sec < 0) return 'in the future';
  if (sec < 45) return `${sec} s ago`;
  if (sec < 3600) return `${Math.round(sec / 60)} min ago`;
  if (sec < 86400) return `${Math.round(sec / 3600)} h ago`;
  return `${Math.round(sec / 86400)} days ago`;
}

// YYYY-MM-DD of a date in the viewer's zone.
export function localDay(d = new Date()) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
}
export function utcDay(d = new Date()) {
  return d.toISOString().slice(0, 10);
}
export function addDays(day, n) {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + n);
  return d.toISOString().slice(0, 10);
}

// <input type="datetime-local"> works in local time; the API in UTC.
export function toLocalInput(s) {
  const d = parseTs(s);
  if (!d) return '';
  const p = (n) => String(n).padStart(2, '0');
  return `${localDay(d)}T${p(d.getHours())}:${p(d.getMinutes())}`;
}
export function fromLocalInput(v) {
  if (!v) return null;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}

export function fmtDistance(m) {
  if (m == null) return '–';
  return m < 1000 ? `${Math.round(m)} m` : `${(m / 1000).toFixed(m < 10000 ? 2 : 1)} km`;
}
export function fmtDuration(s) {
  if (s == null) return '–';
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (h) return `${h} h ${m} min`;
  return m ? `${m} min` : `${Math.round(s)} s`;
}
