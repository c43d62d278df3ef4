// Small DOM helpers. Every text goes in as a text node, never as HTML, so
// that nothing the API answers can run as script.

// h makes an element: h('a', {href: '#/x', class: 'y', onclick: f}, 'text', child).
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k === 'value') el.value = v;
    else if (k === 'checked' || k === 'hidden' || k === 'disabled' || k === 'required' || k === 'selected') el[k] = Boolean(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// zoneKey keeps the reader's choice of zone for times in this browser.
const zoneKey = 'webhookd.portal.zone';

// zone is the zone times are shown in: 'local' (the reader's, the
// default) or 'utc'.
export function zone() {
  try {
    return localStorage.getItem(zoneKey) === 'utc' ? 'utc' : 'local';
  } catch {
    return 'local'; // storage refused (a sandboxed frame): the default
  }
}

// setZone keeps the reader's choice of zone.
export function setZone(z) {
  try {
    localStorage.setItem(zoneKey, z === 'utc' ? 'utc' : 'local');
  } catch {
    // Not kept: this page still shows the choice until it reloads.
  }
}

// time shows an RFC 3339 time in the reader's locale, in the zone they
// chose (their own or UTC) and naming it, with the exact UTC value as a
// tooltip; null shows a dash.
export function time(value) {
  if (!value) return h('span', { class: 'muted' }, '—');
  const d = new Date(value);
  return h('time', { datetime: value, title: value }, d.toLocaleString(undefined, {
    year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit',
    timeZoneName: 'short', timeZone: zone() === 'utc' ? 'UTC' : undefined,
  }));
}

// facts is a definition list of [label, value] pairs.
export function facts(pairs) {
  return h('dl', { class: 'facts' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', null, k), h('dd', null, v)]));
}

// badge shows a status word.
export function badge(word) {
  return h('span', { class: `badge ${word}` }, word);
}

// localToRFC3339 turns a datetime-local or date input's value into an
// RFC 3339 UTC time, or '' when empty.
export function localToRFC3339(value) {
  if (!value) return '';
  const d = new Date(value.length === 10 ? `${value}T00:00` : value);
  return Number.isNaN(d.getTime()) ? '' : d.toISOString();
}

// busy disables a button while fn runs.
export async function busy(button, fn) {
  button.disabled = true;
  try { return await fn(); } finally { button.disabled = false; }
}
