// The portal at a glance: the overview it opens on (endpoints that need
// attention first, each endpoint's last 24 hours as a small chart, the
// latest failed deliveries with a Resend button), the endpoint page's
// charts, the search by id, and an attempt's request headers. app.js hands
// each function a kit of its shared pieces (the API client, what the session
// may do, messages, navigation, the delivery detail).

import { h, time, badge, busy } from './dom.js';
import { rate, sparkline, statsCharts } from './charts.js';
import { targetText } from './destinations.js';

const enc = encodeURIComponent;

// failedShown is how many failed deliveries the overview lists.
const failedShown = 10;

// attention ranks an endpoint: disabled first, then failing (it will be
// disabled if it keeps failing), then the rest.
function attention(sub) {
  if (sub.status === 'disabled') return 0;
  if (sub.health && sub.health.consecutive_failures > 0) return 1;
  return 2;
}

// overview is the page the portal opens on.
export async function overview(view, kit) {
  const subs = await kit.listAll('/webhook_subscriptions');
  const refresh = h('button', { type: 'button', class: 'secondary' }, 'Refresh');
  refresh.addEventListener('click', () => busy(refresh, () => kit.render()));
  view.append(h('div', { class: 'row spread' }, h('h1', null, 'Overview'),
    h('div', { class: 'actions' }, kit.can('manage_endpoints') && h('a', { class: 'button', href: '#/endpoints/new' }, 'Add endpoint'), refresh)),
  searchBox(kit));

  const byID = new Map(subs.map((s) => [s.id, s]));
  const failed = h('div', { class: 'table-wrap', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading…'));
  view.append(h('h2', null, 'Endpoints'));
  if (subs.length === 0) {
    view.append(h('p', { class: 'muted' }, 'No endpoints yet. ', h('a', { href: '#/endpoints' }, 'Add one on the Endpoints page.')));
  }
  const sorted = [...subs].sort((a, b) => attention(a) - attention(b));
  // Every card's last 24 hours is read before the page is shown: a chart
  // arriving later would push the failed deliveries (and their Resend
  // buttons) down under a click already on its way.
  const cards = h('div', { class: 'glance' }, await Promise.all(sorted.map((sub) => endpointGlance(sub, kit))));
  view.append(cards, h('h2', null, 'Recent failed deliveries'), failed);
  await loadFailed(failed, byID, kit);
}

// endpointGlance is one endpoint on the overview: its card as the
// Endpoints page shows it, what needs attention, and its last 24 hours as a
// small chart.
async function endpointGlance(sub, kit) {
  const summary = h('p', { class: 'muted' }, 'Loading the last 24 hours…');
  const chart = h('div', { class: 'spark-slot' });
  const notes = [];
  if (sub.status === 'disabled') {
    notes.push(h('p', { class: 'notice error' }, 'Disabled: it receives nothing. Enable it on its page once it answers again; Recover replays what it missed.'));
  } else if (attention(sub) === 1) {
    notes.push(h('p', { class: 'notice warn' },
      `Failing: ${sub.health.consecutive_failures} ${sub.health.consecutive_failures === 1 ? 'attempt' : 'attempts'} in a row. It will be disabled automatically if it keeps failing.`));
  }
  await kit.api.get(`/webhook_subscriptions/${enc(sub.id)}/stats`, { window: '24h' }).then((stats) => {
    const t = stats.totals;
    summary.className = '';
    summary.textContent = t.attempts === 0 ? 'No attempts in the last 24 hours.'
      : `${rate(t)} succeeded of ${t.attempts} ${t.attempts === 1 ? 'attempt' : 'attempts'} in the last 24 hours.`;
    chart.replaceChildren(sparkline(stats));
  }).catch((err) => {
    summary.textContent = err.status === 404 ? 'Not available on this engine.' : `Could not be loaded: ${kit.describe(err)}`;
  });
  const card = kit.endpointCard(sub);
  card.classList.add('glance-card', `attention-${attention(sub)}`);
  card.dataset.subscriptionId = sub.id;
  card.querySelector('dl')?.before(...notes, summary, chart);
  return card;
}

// loadFailed lists the latest deliveries whose last attempt failed: those
// failed for good and those pending another attempt, newest first.
async function loadFailed(into, byID, kit) {
  let failed;
  let retrying;
  try {
    [failed, retrying] = await Promise.all([
      kit.api.get('/webhook_deliveries', { status: 'failed', limit: failedShown }),
      kit.api.get('/webhook_deliveries', { status: 'pending', limit: 50 }),
    ]);
  } catch (err) {
    into.replaceChildren(h('p', { class: 'notice error' }, kit.describe(err)));
    return;
  }
  const lastFailed = (d) => d.attempts.length > 0 && d.attempts[d.attempts.length - 1].status === 'failed';
  const shown = [...failed.data, ...retrying.data.filter(lastFailed)]
    .sort((a, b) => (a.updated_at < b.updated_at ? 1 : -1))
    .slice(0, failedShown);
  if (shown.length === 0) {
    into.replaceChildren(h('p', { class: 'muted' }, 'No failed deliveries. '));
    return;
  }
  const body = h('tbody');
  for (const d of shown) {
    const last = d.attempts[d.attempts.length - 1];
    const sub = byID.get(d.subscription_id);
    const error = last ? [last.error || 'failed', last.http_status === null ? '' : ` (HTTP ${last.http_status})`].join('') : 'no attempt recorded';
    const actions = h('td', { 'data-label': 'Action' });
    if (kit.can('resend')) {
      const resend = h('button', { type: 'button', class: 'secondary' }, 'Resend');
      resend.addEventListener('click', () => busy(resend, async () => {
        try {
          await kit.api.post(`/webhook_deliveries/${enc(d.id)}/redeliver`);
          kit.flash('ok', `Resent ${d.event_type}: a worker makes one more attempt now. Refresh shows how it went.`);
        } catch (err) {
          kit.showError(err);
        }
      }));
      actions.append(resend);
    }
    body.append(h('tr', { 'data-delivery-id': d.id },
      h('td', { 'data-label': 'Last attempt' }, time(last ? last.attempted_at : d.updated_at)),
      h('td', { 'data-label': 'Event type' }, h('a', { href: `#/deliveries/${enc(d.id)}` }, d.event_type), d.test && ' ', d.test && h('span', { class: 'badge' }, 'test')),
      h('td', { 'data-label': 'Endpoint', class: 'break' }, h('a', { href: `#/endpoints/${enc(d.subscription_id)}` }, sub ? targetText(sub) : 'Open endpoint')),
      h('td', { 'data-label': 'Error', class: 'break' }, error),
      h('td', { 'data-label': 'Status' }, badge(d.status)),
      h('td', { 'data-label': 'Next retry' }, d.status === 'pending' ? time(d.next_attempt_at) : h('span', { class: 'muted' }, 'none: it ended')),
      actions));
  }
  into.replaceChildren(h('table', { class: 'stackable failed-deliveries' },
    h('thead', null, h('tr', null, ['Last attempt', 'Event type', 'Endpoint', 'Error', 'Status', 'Next retry', ''].map((c) => h('th', { scope: 'col' }, c)))),
    body));
}

// searchBox finds an event or a delivery by its id and opens it.
export function searchBox(kit) {
  const input = h('input', { id: 'find-id', type: 'search', placeholder: 'Event or delivery id', autocomplete: 'off', spellcheck: 'false' });
  const found = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite' });
  const form = h('form', { class: 'inline search', role: 'search', 'aria-label': 'Find by id' },
    h('label', { for: 'find-id' }, 'Find an event or delivery by id', input),
    h('button', { type: 'submit' }, 'Find'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const id = input.value.trim();
    if (!/^[0-9a-fA-F-]{32,36}$/.test(id)) {
      found.textContent = 'An id looks like 0190c0de-0000-7000-8000-000000000000.';
      return;
    }
    const button = form.querySelector('button');
    busy(button, async () => {
      found.textContent = 'Looking…';
      for (const [path, hash] of [[`/events/${enc(id)}`, `#/events/${enc(id)}`], [`/webhook_deliveries/${enc(id)}`, `#/deliveries/${enc(id)}`]]) {
        try {
          await kit.api.get(path);
          found.textContent = '';
          kit.go(hash);
          return;
        } catch (err) {
          if (err.status !== 404) {
            found.textContent = kit.describe(err);
            return;
          }
        }
      }
      found.textContent = `No event or delivery has the id ${id}.`;
    });
  });
  return h('div', null, form, found);
}

// deliveryPage shows one delivery (a search result, a failed delivery of
// the overview) with its attempts and the actions on it.
export async function deliveryPage(view, id, kit) {
  const d = await kit.api.get(`/webhook_deliveries/${enc(id)}`);
  const cell = h('div');
  view.append(h('p', null, h('a', { href: '#/overview' }, '← Overview')),
    h('h1', null, d.event_type),
    h('p', null, h('a', { href: `#/events/${enc(d.event_id)}` }, 'Its event'), ' · ',
      h('a', { href: `#/endpoints/${enc(d.subscription_id)}` }, 'Its endpoint')),
    cell);
  await kit.loadDelivery(d.id, cell);
}

// endpointStats is the endpoint page's section of charts: 24 hours by the
// hour or 7 days by 6 hours, from the stats route.
export async function endpointStats(sub, kit) {
  const body = h('div', { 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading…'));
  const windows = [['24h', 'Last 24 hours'], ['7d', 'Last 7 days']];
  const picker = h('div', { class: 'row', role: 'group', 'aria-label': 'Period' });
  const load = async (w) => {
    for (const b of picker.querySelectorAll('button')) b.setAttribute('aria-pressed', String(b.dataset.window === w));
    try {
      const stats = await kit.api.get(`/webhook_subscriptions/${enc(sub.id)}/stats`, { window: w });
      body.replaceChildren(statsCharts(stats));
    } catch (err) {
      body.replaceChildren(h('p', { class: err.status === 404 ? 'muted' : 'notice error' },
        err.status === 404 ? 'Charts are not available on this engine.' : kit.describe(err)));
    }
  };
  for (const [w, label] of windows) {
    const b = h('button', { type: 'button', class: 'secondary', 'data-window': w, 'aria-pressed': 'false' }, label);
    b.addEventListener('click', () => busy(b, () => load(w)));
    picker.append(b);
  }
  // The first window is read before the section is shown: charts that
  // arrived later would push the page's buttons down under a pointer (or
  // a test's click) already on its way to them.
  await load('24h');
  return h('section', { class: 'card endpoint-stats', 'aria-label': 'Deliveries over time' },
    h('h2', null, 'Deliveries over time'), picker, body);
}

// requestHeaders shows the headers an attempt's request carried, as the
// API recorded them (credentials masked there), or nothing when it did not.
export function requestHeaders(attempt) {
  const entries = Object.entries(attempt.request_headers || {}).sort(([a], [b]) => a.localeCompare(b));
  if (entries.length === 0) return null;
  return h('details', { class: 'request-headers' },
    h('summary', null, `Request headers of attempt ${attempt.number}`),
    h('dl', { class: 'facts' }, entries.map(([k, v]) => [h('dt', null, h('code', null, k)), h('dd', null, h('code', null, v))])));
}
