// The merchant portal: a single-page application with hash routes
// (#/overview, the default, and #/deliveries/{id}: overview.js;
// #/endpoints, #/endpoints/{id}, #/events, #/events/{id}, #/event-types,
// #/replay: replay.js)
// on top of the /v1 API. What a session may do comes from
// GET /v1/portal_sessions/current: a button whose request the session may
// not make is not shown at all.

import { Api, ApiError, takeToken, forgetToken } from './api.js';
import { h, time, facts, badge, localToRFC3339, busy, zone, setZone } from './dom.js';
import { rawField, indent } from './json.js';
import { securityFieldset, securityFacts } from './endpointsecurity.js';
import { overview, deliveryPage, endpointStats, requestHeaders } from './overview.js';
import { pollFacts } from './poll.js';
import { endpointName, kindLabel, targetText, destinationFacts, destinationFieldset, isBroker } from './destinations.js';
import { shapeFacts, shapeFieldset } from './deliveryshape.js';
import { retryFacts, retryFieldset } from './retrypolicy.js';
import { showFieldError, clearFieldErrors } from './fielderrors.js';
import { answerColumns, answerCells, batchCell, hasBatch } from './attemptanswer.js';
import { transformationEditor, sentBody } from './transformation.js';
import { replayPage } from './replay.js';

const verifyDocs = 'https://docs.webhookd.dev/events#verifying-the-signature';
const everyCapability = ['view', 'manage_endpoints', 'view_secret', 'resend'];
const pageSize = 20;

const main = document.getElementById('main');
const flashBox = document.getElementById('flash');

// The tab's state: one session, one API client.
const state = {
  api: null,
  session: null,
  ended: false,
  renderSeq: 0,
  firstRender: true,
  // carried is a message shown once after the next navigation.
  carried: null,
  // createdSecret is the secret of the endpoint just created: shown once.
  createdSecret: null,
  // eventTypes caches the catalogue (null when the engine has none).
  eventTypes: undefined,
};

function can(capability) {
  return state.session.capabilities.includes(capability);
}

// destinationKinds are the metadata of the destination kinds the server
// allows (the session's destination_kinds): destinations.js draws their
// names, facts and form from it. An older server lists none.
function destinationKinds() {
  return Array.isArray(state.session.destination_kinds) ? state.session.destination_kinds : [];
}

const enc = encodeURIComponent;

// ---- messages -------------------------------------------------------------

function flash(kind, text) {
  flashBox.hidden = !text;
  flashBox.className = `flash ${kind || ''}`;
  flashBox.setAttribute('role', kind === 'error' ? 'alert' : 'status');
  flashBox.textContent = text || '';
}

function describe(err) {
  return err instanceof ApiError ? err.describe() : String((err && err.message) || err);
}

function showError(err) {
  if (!state.ended) flash('error', describe(err));
}

// go navigates, keeping a message for the page it opens.
function go(hash, message) {
  state.carried = message || null;
  if (location.hash === hash) render();
  else location.hash = hash;
}

// ---- session --------------------------------------------------------------

function showEnded(title, message) {
  state.ended = true;
  forgetToken();
  document.getElementById('nav').hidden = true;
  document.getElementById('sign-out').hidden = true;
  document.getElementById('session-ends').hidden = true;
  flash('', '');
  main.replaceChildren(h('h1', { tabindex: '-1' }, title), h('p', null, message));
}

// fallbackSession describes an API key used as the token on an engine
// that does not know portal sessions yet: the key's scopes then decide, and
// the server refuses what the key may not do.
function fallbackSession(token) {
  return {
    merchant_id: null, capabilities: everyCapability, expires_at: null,
    branding: { accent_color: null, logo_url: null },
    environment: token.startsWith('prod.') ? 'live' : 'sandbox',
  };
}

function applySession() {
  const s = state.session;
  const env = document.getElementById('environment');
  env.textContent = s.environment === 'live' ? 'Live' : 'Sandbox';
  env.hidden = !s.environment;
  const branding = s.branding || {};
  if (/^#[0-9a-fA-F]{6}$/.test(branding.accent_color || '')) {
    // The policy forbids inline styles, not the CSSOM.
    document.documentElement.style.setProperty('--accent', branding.accent_color);
  }
  if (/^https:\/\//.test(branding.logo_url || '')) {
    const logo = document.getElementById('logo');
    logo.src = branding.logo_url;
    logo.alt = 'Logo';
    logo.hidden = false;
  }
  const ends = document.getElementById('session-ends');
  if (s.expires_at) {
    ends.replaceChildren('Session ends ', time(s.expires_at));
    ends.hidden = false;
  }
  // Times show in the zone the reader picks; the page redraws in it.
  const zonePicker = document.getElementById('zone');
  zonePicker.value = zone();
  document.getElementById('zone-label').hidden = false;
  zonePicker.addEventListener('change', () => {
    setZone(zonePicker.value);
    if (s.expires_at) ends.replaceChildren('Session ends ', time(s.expires_at));
    render();
  });
  document.getElementById('nav').hidden = false;
  const signOut = document.getElementById('sign-out');
  signOut.hidden = false;
  signOut.addEventListener('click', () => busy(signOut, async () => {
    try {
      await state.api.del('/portal_sessions/current');
    } catch (err) {
      // Ended already, or a key that cannot be ended here: either way this
      // tab forgets it.
    }
    showEnded('Signed out', 'You are signed out. Open a new portal link to come back.');
  }));
}

async function boot() {
  const token = takeToken();
  if (!token) {
    showEnded('No session', 'There is no session in this tab. Open the portal with the link you were given.');
    return;
  }
  state.api = new Api(token, () => showEnded('Session ended',
    'This session has ended: it expired or was signed out. Ask for a new link to the portal.'));
  try {
    state.session = await state.api.get('/portal_sessions/current');
  } catch (err) {
    if (err.status === 401) return; // onEnded has said so.
    if (err.status === 404 && err.code === 'resource_not_found') {
      state.session = fallbackSession(token);
    } else {
      main.replaceChildren(h('h1', null, 'The portal could not start'), h('p', { class: 'notice error', role: 'alert' }, describe(err)));
      return;
    }
  }
  if (!state.session.capabilities.includes('view')) state.session.capabilities.push('view');
  applySession();
  window.addEventListener('hashchange', render);
  render();
}

// ---- routing --------------------------------------------------------------

// kit is what overview.js needs of this module.
function kit() {
  return { api: state.api, can, describe, flash, showError, go, render, listAll, endpointCard, loadDelivery };
}

function markNav(section) {
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.dataset.route === section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

async function render() {
  if (state.ended || /^#token=/.test(location.hash)) return;
  const seq = ++state.renderSeq;
  const parts = (location.hash.replace(/^#\/?/, '') || 'overview').split('/').map(decodeURIComponent);
  markNav(parts[0]);
  // The message of the action that led here shows with the page it is
  // about, not over the page it leaves.
  const carried = state.carried;
  state.carried = null;
  const view = h('div');
  let build;
  switch (parts[0]) {
    case 'overview':
      build = () => overview(view, kit());
      break;
    case 'deliveries':
      build = () => deliveryPage(view, parts[1] || '', kit());
      break;
    case 'endpoints':
      if (parts[1] === 'new') build = () => endpointForm(view, null);
      else if (parts[1] && parts[2] === 'edit') build = () => endpointForm(view, parts[1]);
      else if (parts[1]) build = () => endpointDetail(view, parts[1]);
      else build = () => endpointList(view);
      break;
    case 'events':
      build = parts[1] ? () => eventDetail(view, parts[1]) : () => eventList(view);
      break;
    case 'event-types':
      build = () => catalogue(view);
      break;
    case 'replay':
      build = () => replayPage(view, kit());
      break;
    default:
      build = async () => view.append(h('h1', null, 'Page not found'), h('p', null, h('a', { href: '#/endpoints' }, 'Go to your endpoints')));
  }
  try {
    await build();
  } catch (err) {
    if (state.ended) return;
    const title = err.status === 404 ? 'Not found' : 'Something went wrong';
    view.replaceChildren(h('h1', null, title), h('p', { class: 'notice error', role: 'alert' }, describe(err)));
  }
  if (seq !== state.renderSeq || state.ended) return;
  if (carried) flash(carried.kind, carried.text);
  else flash('', '');
  main.replaceChildren(view);
  if (!state.firstRender) main.focus({ preventScroll: false });
  state.firstRender = false;
}

// ---- shared pieces --------------------------------------------------------

async function listAll(path, query) {
  const out = [];
  let cursor;
  for (;;) {
    const page = await state.api.get(path, { ...query, limit: 100, cursor });
    out.push(...page.data);
    if (!page.has_more) return out;
    cursor = page.next_cursor;
  }
}

async function eventTypes() {
  if (state.eventTypes !== undefined) return state.eventTypes;
  try {
    state.eventTypes = (await state.api.get('/event_types')).data;
  } catch (err) {
    if (err.status !== 404) throw err;
    state.eventTypes = null; // an engine without the catalogue route
  }
  return state.eventTypes;
}

function eventsText(events) {
  return events.includes('*') ? 'Every event type' : events.join(', ');
}

// confirmInline asks a question under anchor with a confirming button; a
// real button rather than window.confirm, so it works with the keyboard
// and in a frame.
function confirmInline(anchor, question, confirmLabel, action, danger) {
  const old = anchor.parentNode.querySelector('.confirm');
  if (old) old.remove();
  const yes = h('button', { type: 'button', class: danger ? 'danger' : '' }, confirmLabel);
  const no = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
  const box = h('div', { class: 'notice warn confirm', role: 'group', 'aria-label': question }, h('p', null, question), h('div', { class: 'actions' }, yes, no));
  no.addEventListener('click', () => { box.remove(); anchor.focus(); });
  yes.addEventListener('click', () => busy(yes, async () => {
    try {
      await action();
      box.remove();
    } catch (err) {
      showError(err);
    }
  }));
  anchor.after(box);
  yes.focus();
}

function rateText(health) {
  if (health.success_rate_24h === null || health.success_rate_24h === undefined) return 'No attempts in the last 24 hours';
  const pct = Math.round(health.success_rate_24h * 1000) / 10;
  return `${pct} % (${health.succeeded_24h} of ${health.attempts_24h} ${health.attempts_24h === 1 ? 'attempt' : 'attempts'})`;
}

// statusBadges shows a subscription's status and, when it is enabled but
// its last attempts failed, that it is failing and for how many attempts
// in a row: "enabled" alone would read as healthy.
function statusBadges(sub) {
  const failures = (sub.health && sub.health.consecutive_failures) || 0;
  if (sub.status !== 'enabled' || failures === 0) return badge(sub.status);
  return [badge(sub.status), ' ', h('span', { class: 'badge failing',
    title: 'Its last attempts failed. An endpoint that keeps failing for days is disabled.' },
  `failing: ${failures} in a row`)];
}

// healthFacts shows a subscription's health, then completes it with the
// last 24 hours from /health.
function healthFacts(sub) {
  const failures = h('span', null, String(sub.health.consecutive_failures));
  const lastSuccess = h('span', null, time(sub.health.last_success_at));
  const lastFailure = h('span', null, time(sub.health.last_failure_at));
  const rate = h('span', { class: 'muted' }, 'Loading…');
  state.api.get(`/webhook_subscriptions/${enc(sub.id)}/health`).then((health) => {
    failures.textContent = String(health.consecutive_failures);
    lastSuccess.replaceChildren(time(health.last_success_at));
    lastFailure.replaceChildren(time(health.last_failure_at));
    rate.className = '';
    rate.textContent = rateText(health);
  }).catch((err) => {
    rate.textContent = err.status === 404 ? 'Not available' : `Could not be loaded: ${describe(err)}`;
  });
  return [
    ['Consecutive failures', failures],
    ['Last success', lastSuccess],
    ['Last failure', lastFailure],
    ['Success rate (24 h)', rate],
  ];
}

// controlFacts shows how a subscription narrows and paces its deliveries:
// its filter, extra headers (values masked by the API), rate limit and
// ordering.
function controlFacts(sub) {
  const headers = Object.entries(sub.headers || {});
  const ordering = sub.ordering && typeof sub.ordering === 'object' && sub.ordering.key;
  return [
    ['Filter', sub.filter ? h('code', { class: 'break' }, sub.filter) : 'None — every event of its types'],
    ['Extra headers', headers.length === 0 ? 'None'
      : h('ul', { class: 'plain' }, headers.map(([name, masked]) => h('li', null, h('code', null, name), ': ', h('code', null, masked))))],
    ['Rate limit', Number.isInteger(sub.rate_limit) ? `${sub.rate_limit} per second` : 'No limit'],
    ['Ordering', ordering ? ['By ', h('code', null, ordering)] : 'None'],
  ];
}

// ---- endpoints ------------------------------------------------------------

async function endpointList(view) {
  const subs = await listAll('/webhook_subscriptions');
  view.append(h('div', { class: 'row spread' },
    h('h1', null, 'Endpoints'),
    can('manage_endpoints') && h('a', { class: 'button', href: '#/endpoints/new' }, 'Add endpoint')));
  if (subs.length === 0) {
    view.append(h('p', { class: 'muted' }, 'No endpoints yet.'));
    return;
  }
  for (const sub of subs) view.append(endpointCard(sub));
}

function endpointCard(sub) {
  const card = h('article', { class: 'card', 'aria-label': `Endpoint ${targetText(sub)}` },
    h('h2', null, kindLabel(sub, destinationKinds()), isBroker(sub) && ' ', h('a', { href: `#/endpoints/${enc(sub.id)}` }, targetText(sub))),
    h('div', { class: 'row' }, statusBadges(sub), sub.description && h('span', null, sub.description)),
    facts([['Event types', eventsText(sub.events)], ...pollFacts(sub), ...healthFacts(sub)]));
  if (can('manage_endpoints')) {
    const actions = h('div', { class: 'actions' },
      h('a', { class: 'button secondary', href: `#/endpoints/${enc(sub.id)}/edit` }, 'Edit'),
      statusButton(sub, () => render()),
      deleteButton(sub));
    card.append(actions);
  }
  return card;
}

function statusButton(sub, after) {
  const enable = sub.status !== 'enabled';
  const b = h('button', { type: 'button', class: 'secondary' }, enable ? 'Enable' : 'Disable');
  b.addEventListener('click', () => busy(b, async () => {
    try {
      await state.api.post(`/webhook_subscriptions/${enc(sub.id)}`, { status: enable ? 'enabled' : 'disabled' });
      state.carried = { kind: 'ok', text: enable ? 'Endpoint enabled.' : 'Endpoint disabled.' };
      after();
    } catch (err) {
      showError(err);
    }
  }));
  return b;
}

function deleteButton(sub) {
  const b = h('button', { type: 'button', class: 'danger' }, 'Delete');
  b.addEventListener('click', () => confirmInline(b,
    `Delete the endpoint ${targetText(sub)}? Its pending deliveries end as failed.`, 'Delete endpoint', async () => {
      await state.api.del(`/webhook_subscriptions/${enc(sub.id)}`);
      go('#/endpoints', { kind: 'ok', text: 'Endpoint deleted.' });
    }, true));
  return b;
}

async function endpointForm(view, id) {
  const title = id ? 'Edit endpoint' : 'Add endpoint';
  if (!can('manage_endpoints')) {
    view.append(h('h1', null, title), h('p', { class: 'notice' }, 'This session cannot change endpoints.'));
    return;
  }
  const [sub, types] = await Promise.all([id ? state.api.get(`/webhook_subscriptions/${enc(id)}`) : null, eventTypes()]);
  const chosen = new Set(sub ? sub.events : ['*']);
  const url = h('input', { id: 'endpoint-url', name: 'url', type: 'url', required: true, value: sub && !isBroker(sub) ? sub.url : '',
    placeholder: 'https://example.com/webhooks', autocomplete: 'off', 'data-param': 'url' });
  const urlLabel = h('label', { for: 'endpoint-url' }, 'URL', url);
  const destination = destinationFieldset(sub, state.session.destinations || null, destinationKinds(), urlLabel);
  const shape = shapeFieldset(sub);
  const retries = retryFieldset(sub);
  const description = h('input', { id: 'endpoint-description', name: 'description', type: 'text', value: sub && sub.description ? sub.description : '' });
  let typeField;
  let readTypes;
  if (types) {
    const all = h('input', { type: 'checkbox', value: '*', checked: chosen.has('*') });
    const boxes = types.filter((t) => t.subscribable).map((t) => h('input', { type: 'checkbox', value: t.name, checked: chosen.has(t.name) }));
    typeField = h('fieldset', null, h('legend', null, 'Event types'),
      h('label', null, all, 'Every event type, future ones included'),
      h('div', { class: 'checks' }, boxes.map((b) => h('label', null, b, b.value))));
    readTypes = () => (all.checked ? ['*'] : boxes.filter((b) => b.checked).map((b) => b.value));
  } else {
    const text = h('input', { id: 'endpoint-events', type: 'text', value: [...chosen].join(', ') });
    typeField = h('label', { for: 'endpoint-events' }, 'Event types (comma-separated, * for all)', text);
    readTypes = () => text.value.split(',').map((s) => s.trim()).filter(Boolean);
  }
  // The delivery controls as the form shows them: '' is none.
  const shown = {
    filter: sub && sub.filter ? sub.filter : '',
    rateLimit: sub && Number.isInteger(sub.rate_limit) ? String(sub.rate_limit) : '',
    orderingKey: sub && sub.ordering && typeof sub.ordering === 'object' ? sub.ordering.key : '',
  };
  const filter = h('textarea', { id: 'endpoint-filter', name: 'filter', rows: '3', spellcheck: 'false', value: shown.filter,
    placeholder: 'payload.currency == "EUR" && payload.amount > "1000"' });
  const rateLimit = h('input', { id: 'endpoint-rate-limit', name: 'rate_limit', type: 'number', min: '1', step: '1', inputmode: 'numeric', value: shown.rateLimit });
  const orderingKey = h('input', { id: 'endpoint-ordering-key', name: 'ordering_key', type: 'text', value: shown.orderingKey,
    placeholder: 'payload.account_id', autocomplete: 'off' });
  const security = securityFieldset(sub);
  const submit = h('button', { type: 'submit' }, id ? 'Save changes' : 'Create endpoint');
  const form = h('form', { class: 'stack', novalidate: true },
    destination.node, urlLabel,
    h('label', { for: 'endpoint-description' }, 'Description (optional)', description),
    typeField,
    h('fieldset', { class: 'controls' }, h('legend', null, 'Delivery controls'),
      h('label', { for: 'endpoint-filter' }, 'Filter (optional): a CEL expression on the event; empty delivers every event of its types', filter),
      h('label', { for: 'endpoint-rate-limit' }, 'Rate limit (optional): deliveries per second; empty is no limit', rateLimit),
      h('label', { for: 'endpoint-ordering-key' }, 'Ordering key (optional): deliveries with the same value go one at a time, in order; empty is none', orderingKey),
      sub && Object.keys(sub.headers || {}).length > 0 && h('p', { class: 'muted' }, 'Extra headers are kept as they are: they are set through the API.')),
    shape.node,
    retries.node,
    security.node,
    h('div', { class: 'actions' }, submit,
      h('a', { class: 'button secondary', href: id ? `#/endpoints/${enc(id)}` : '#/endpoints' }, 'Cancel')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const events = readTypes();
    clearFieldErrors(form);
    let routed;
    try {
      routed = { ...destination.read(url.value.trim()), ...shape.read(destination.kind()), ...retries.read() };
    } catch (err) {
      flash('error', err.message);
      showFieldError(form, err);
      return;
    }
    if (events.length === 0) { flash('error', 'Choose at least one event type.'); return; }
    if (rateLimit.validity.badInput) { flash('error', 'Enter the rate limit as a whole number of deliveries per second, or leave it empty.'); rateLimit.focus(); return; }
    let secured;
    try { secured = security.read(); } catch (err) { flash('error', err.message); return; }
    busy(submit, async () => {
      const body = { ...routed, events, description: description.value.trim() || null };
      // A control goes in the request only when the form changes it: an
      // edit leaves the others as they are, and null (or "none") clears.
      const now = { filter: filter.value.trim(), rateLimit: rateLimit.value.trim(), orderingKey: orderingKey.value.trim() };
      if (now.filter !== shown.filter) body.filter = now.filter || null;
      if (now.rateLimit !== shown.rateLimit) body.rate_limit = now.rateLimit ? Number(now.rateLimit) : null;
      if (now.orderingKey !== shown.orderingKey) body.ordering = now.orderingKey ? { key: now.orderingKey } : 'none';
      Object.assign(body, secured);
      try {
        if (id) {
          await state.api.post(`/webhook_subscriptions/${enc(id)}`, body);
          go(`#/endpoints/${enc(id)}`, { kind: 'ok', text: 'Endpoint saved.' });
        } else {
          if (body.description === null) delete body.description;
          const created = await state.api.post('/webhook_subscriptions', body);
          state.createdSecret = { id: created.id, secret: created.secret };
          go(`#/endpoints/${enc(created.id)}`, { kind: 'ok', text: 'Endpoint created.' });
        }
      } catch (err) {
        showError(err);
        showFieldError(form, err);
      }
    });
  });
  view.append(h('p', null, h('a', { href: '#/endpoints' }, '← All endpoints')), h('h1', null, title), form);
}

async function endpointDetail(view, id) {
  const sub = await state.api.get(`/webhook_subscriptions/${enc(id)}`);
  const panel = h('div', { 'aria-live': 'polite' });
  const stats = await endpointStats(sub, kit());
  view.append(
    h('p', null, h('a', { href: '#/endpoints' }, '← All endpoints')),
    h('h1', null, endpointName(sub, destinationKinds())),
    h('section', { class: 'card', 'aria-label': 'Endpoint' },
      h('div', { class: 'row' }, statusBadges(sub), sub.description && h('span', null, sub.description)),
      facts([...destinationFacts(sub, destinationKinds()), ['Event types', eventsText(sub.events)], ['Created', time(sub.created_at)], ...pollFacts(sub), ...shapeFacts(sub),
        ...retryFacts(sub), ...controlFacts(sub), ...healthFacts(sub)])),
    h('section', { class: 'card', 'aria-label': 'Endpoint security' }, h('h2', null, 'Endpoint security'), facts(securityFacts(sub))),
    stats);

  const actions = h('div', { class: 'actions' });
  const deliveries = deliveriesBrowser({ subscription_id: sub.id }, { filters: true });
  if (can('manage_endpoints')) {
    actions.append(h('a', { class: 'button secondary', href: `#/endpoints/${enc(sub.id)}/edit` }, 'Edit'), statusButton(sub, () => render()));
    const test = h('button', { type: 'button' }, 'Send test event');
    test.addEventListener('click', () => busy(test, async () => {
      try {
        await state.api.post(`/webhook_subscriptions/${enc(sub.id)}/send_test_event`);
        flash('ok', 'Test event sent. Its delivery shows below; Refresh shows its attempts.');
        await deliveries.reload();
      } catch (err) {
        showError(err);
      }
    }));
    const check = h('button', { type: 'button' }, 'Check my endpoint');
    check.addEventListener('click', () => busy(check, () => checkEndpoint(sub, panel)));
    // A broker takes every message: the check is for HTTP endpoints.
    actions.append(test);
    if (!isBroker(sub)) actions.append(check);
  }
  if (can('view_secret')) {
    const reveal = h('button', { type: 'button', class: 'secondary' }, 'Reveal signing secret');
    reveal.addEventListener('click', () => busy(reveal, () => revealSecret(sub, panel)));
    actions.append(reveal);
  }
  if (can('manage_endpoints')) {
    const rotate = h('button', { type: 'button', class: 'secondary' }, 'Rotate signing secret');
    rotate.addEventListener('click', () => confirmInline(rotate,
      'Rotate the signing secret? For the next 24 hours deliveries are signed with both the new and the current secret, so that you can update your endpoint.',
      'Rotate secret', () => rotateSecret(sub, panel)));
    actions.append(rotate, deleteButton(sub));
  }
  view.append(actions, panel);

  if (state.createdSecret && state.createdSecret.id === sub.id) {
    panel.append(secretBox('Signing secret', state.createdSecret.secret,
      h('p', null, 'Copy it now into your endpoint\'s configuration: it is shown only once here.')));
    state.createdSecret = null;
  }

  // A poll subscription's deliveries are read as stored: nothing to
  // reshape.
  const poll = sub.destination && sub.destination.type === 'poll';
  if (can('manage_endpoints') && !poll) {
    const types = (await eventTypes()) || [];
    view.append(transformationEditor(sub, { api: state.api, showError, eventTypes: types.map((t) => t.name), templates: state.session.transformation_templates },
      (text) => go(`#/endpoints/${enc(sub.id)}`, { kind: 'ok', text })));
  }
  view.append(verifySnippets());
  if (can('resend')) view.append(recoverForm(sub, deliveries));
  view.append(h('h2', null, 'Deliveries'), deliveries);
  await deliveries.reload();
}

// verifySnippets shows how an endpoint verifies its deliveries, in the
// languages receivers are written in, each with a library that follows
// Standard Webhooks; the secret comes from the endpoint's configuration,
// never from this page.
function verifySnippets() {
  const langs = [
    ['Go', 'webhookd\'s receiver package', `import "github.com/webhookd/webhookd/receiver"

v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{os.Getenv("WEBHOOK_SECRET")}})
// In the handler, on the raw body, before decoding it:
body, err := io.ReadAll(r.Body)
if err := v.Verify(r.Header, body); err != nil {
\thttp.Error(w, "bad signature", http.StatusUnauthorized)
\treturn
}`],
    ['Node.js', 'npm install standardwebhooks', `import { Webhook } from "standardwebhooks";

const wh = new Webhook(process.env.WEBHOOK_SECRET.replace(/^whsec_/, ""));
// rawBody: the request body as received (a string), before JSON.parse.
const event = wh.verify(rawBody, req.headers); // throws on a bad signature: answer 401`],
    ['Python', 'pip install standardwebhooks', `import os
from standardwebhooks.webhooks import Webhook

wh = Webhook(os.environ["WEBHOOK_SECRET"].removeprefix("whsec_"))
# request.get_data(): the raw body, before json.loads.
event = wh.verify(request.get_data(), dict(request.headers))  # raises on a bad signature: answer 401`],
  ];
  return h('details', { class: 'card verify' }, h('summary', null, 'Verify these deliveries'),
    h('p', null, 'Check every delivery\'s signature with the endpoint\'s signing secret before acting on it, on the body exactly as received.'),
    langs.map(([name, how, code]) => h('section', { 'aria-label': `Verify in ${name}` },
      h('h3', null, name, ' ', h('span', { class: 'muted' }, `(${how})`)),
      h('pre', { tabindex: '0' }, code))));
}

function secretBox(title, secret, ...notes) {
  return h('section', { class: 'card', 'aria-label': title },
    h('h2', null, title), h('p', null, h('code', { class: 'secret', id: 'signing-secret' }, secret)), ...notes);
}

// showInPanel puts what an action answered in the endpoint's panel, in
// place of the last one's, and clears the last one's message with it (a
// "rotated" banner above a check's results read as if about them).
function showInPanel(panel, ...nodes) {
  flash();
  panel.replaceChildren(...nodes);
}

async function revealSecret(sub, panel) {
  try {
    const s = await state.api.get(`/webhook_subscriptions/${enc(sub.id)}/secret`);
    showInPanel(panel, secretBox('Signing secret', s.secret,
      s.previous_secret_expires_at && h('p', null, 'The previous secret also signs deliveries until ', time(s.previous_secret_expires_at), '.')));
  } catch (err) {
    showError(err);
  }
}

async function rotateSecret(sub, panel) {
  const rotated = await state.api.post(`/webhook_subscriptions/${enc(sub.id)}/rotate_secret`);
  let until = null;
  if (can('view_secret')) {
    try {
      until = (await state.api.get(`/webhook_subscriptions/${enc(sub.id)}/secret`)).previous_secret_expires_at;
    } catch (err) {
      until = null;
    }
  }
  const overlap = until
    ? h('p', null, 'The previous secret keeps signing deliveries, alongside the new one, until ', time(until), '. Update your endpoint before then.')
    : h('p', null, 'The previous secret keeps signing deliveries, alongside the new one, for 24 hours. Update your endpoint before then.');
  showInPanel(panel, secretBox('New signing secret', rotated.secret, overlap));
  flash('ok', 'Signing secret rotated.');
}

const checkCases = {
  valid: ['Correctly signed', true],
  wrong_signature: ['Wrong signature', false],
  stale_timestamp: ['Stale timestamp', false],
};

async function checkEndpoint(sub, panel) {
  let res;
  try {
    res = await state.api.post(`/webhook_subscriptions/${enc(sub.id)}/check`);
  } catch (err) {
    showError(err);
    return;
  }
  const rows = res.results.map((r) => {
    const [label, shouldAccept] = checkCases[r.case] || [r.case, false];
    const right = r.accepted === shouldAccept;
    return h('tr', null,
      h('td', { 'data-label': 'Delivery' }, label),
      h('td', { 'data-label': 'HTTP status' }, r.http_status === null ? '—' : String(r.http_status)),
      h('td', { 'data-label': 'Error' }, r.error || '—'),
      h('td', { 'data-label': 'Your endpoint' }, r.accepted ? 'accepted' : 'refused'),
      h('td', { 'data-label': 'Expected' }, right ? 'as expected' : (shouldAccept ? 'should accept' : 'should refuse')));
  });
  const valid = res.results.find((r) => r.case === 'valid');
  const verdict = res.verifies_signatures
    ? h('p', { class: 'notice ok' }, 'Your endpoint verifies signatures: it refused both badly signed deliveries.')
    : h('div', { class: 'notice warn', role: 'alert' },
      h('strong', null, 'Does not verify signatures.'),
      ' Your endpoint accepted a delivery with a wrong signature or a stale timestamp, so anyone who knows its URL can send it forged webhooks. ',
      h('a', { href: verifyDocs, target: '_blank', rel: 'noopener noreferrer' }, 'How to verify signatures'));
  showInPanel(panel, h('section', { class: 'card', 'aria-label': 'Check my endpoint' },
    h('h2', null, 'Check my endpoint'),
    h('p', null, 'Three test deliveries were sent: one correctly signed, one with a wrong signature, one with a stale timestamp.'),
    h('div', { class: 'table-wrap' }, h('table', { class: 'stackable' },
      h('thead', null, h('tr', null, ['Delivery', 'HTTP status', 'Error', 'Your endpoint', 'Expected'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, rows))),
    verdict,
    valid && !valid.accepted && h('p', { class: 'notice error' }, 'Your endpoint refused the correctly signed delivery: check that it uses the current signing secret.')));
}

function recoverForm(sub, deliveries) {
  const since = h('input', { id: 'recover-since', type: 'datetime-local', required: true, step: '1' });
  const button = h('button', { type: 'submit' }, 'Recover');
  const result = h('div', { 'aria-live': 'polite' });
  const form = h('form', { class: 'inline', novalidate: true },
    h('label', { for: 'recover-since' }, 'Recover every failed delivery since', since), button);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const at = localToRFC3339(since.value);
    if (!at) { flash('error', 'Choose the date and time to recover from.'); since.focus(); return; }
    busy(button, async () => {
      try {
        const res = await state.api.post(`/webhook_subscriptions/${enc(sub.id)}/recover`, { since: at });
        const n = res.deliveries;
        result.replaceChildren(h('p', { class: 'notice ok' },
          n === 0 ? 'No delivery failed for good since then.' : `${n} failed ${n === 1 ? 'delivery gets' : 'deliveries get'} another attempt now.`));
      } catch (err) {
        showError(err);
      }
    });
  });
  return h('section', { 'aria-label': 'Recover failed deliveries' }, h('h2', null, 'Recover failed deliveries'), form, result);
}

// ---- deliveries -----------------------------------------------------------

// deliveriesBrowser lists deliveries matching fixed (subscription_id or
// event_id), newest first, with the API's cursors; it answers an element
// with a reload method.
function deliveriesBrowser(fixed, { filters, showEndpoint }) {
  const browse = { cursors: [undefined], page: 0, status: '', since: '' };
  const list = h('div', { class: 'table-wrap' });
  const newer = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Newer');
  const older = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Older');
  const refresh = h('button', { type: 'button', class: 'secondary' }, 'Refresh');
  const section = h('section', { class: 'deliveries', 'aria-label': 'Deliveries' });
  // expanded holds the detail cell of each delivery whose attempts the
  // person opened: a redraw of the list keeps them open, so that a detail
  // never vanishes under them.
  const expanded = new Map();
  // loads numbers the reloads: only the latest one draws the list, so that
  // a slow answer never replaces a newer one.
  let loads = 0;

  async function reload() {
    const load = ++loads;
    let page;
    let cursor = browse.cursors[browse.page];
    const shown = [];
    // A page filtered on both subscription and status may be empty while
    // more follow: follow the cursor a few times before showing nothing.
    for (let hops = 0; hops < 10; hops++) {
      page = await state.api.get('/webhook_deliveries', {
        ...fixed, status: browse.status, 'created_at.gte': browse.since, limit: pageSize, cursor,
      });
      shown.push(...page.data);
      if (shown.length > 0 || !page.has_more) break;
      cursor = page.next_cursor;
    }
    if (load !== loads) return;
    browse.cursors[browse.page + 1] = page.has_more ? page.next_cursor : undefined;
    newer.hidden = browse.page === 0;
    older.hidden = !page.has_more;
    for (const id of expanded.keys()) {
      if (!shown.some((d) => d.id === id)) expanded.delete(id);
    }
    // Moving an open detail into the new table takes the focus from the
    // button in it: give it back.
    const focused = list.contains(document.activeElement) ? document.activeElement : null;
    list.replaceChildren(deliveryTable(shown, showEndpoint, expanded));
    if (focused && focused.isConnected) focused.focus({ preventScroll: true });
    // The attempts of an open detail may have changed with the list: the
    // reload ends when they are drawn too.
    await Promise.all([...expanded].map(([id, cell]) => loadDelivery(id, cell)));
  }

  newer.addEventListener('click', () => { browse.page--; busy(newer, () => reload().catch(showError)); });
  older.addEventListener('click', () => { browse.page++; busy(older, () => reload().catch(showError)); });
  refresh.addEventListener('click', () => busy(refresh, () => reload().catch(showError)));

  if (filters) {
    const status = h('select', { id: 'delivery-status' },
      h('option', { value: '' }, 'Any'), ['pending', 'scheduled', 'succeeded', 'failed', 'skipped', 'cancelled', 'erased'].map((s) => h('option', { value: s }, s)));
    const since = h('input', { id: 'delivery-since', type: 'datetime-local', step: '1' });
    const form = h('form', { class: 'inline', 'aria-label': 'Filter deliveries' },
      h('label', { for: 'delivery-status' }, 'Status', status),
      h('label', { for: 'delivery-since' }, 'Created since', since),
      h('button', { type: 'submit' }, 'Apply'), refresh);
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      browse.status = status.value;
      browse.since = localToRFC3339(since.value);
      browse.cursors = [undefined];
      browse.page = 0;
      reload().catch(showError);
    });
    section.append(form);
  } else {
    section.append(h('div', { class: 'actions' }, refresh));
  }
  section.append(list, h('div', { class: 'pager' }, newer, older));
  section.reload = reload;
  return section;
}

// deliveryTable draws deliveries; expanded maps the id of each delivery
// whose attempts are open to its detail cell, which the table reuses.
function deliveryTable(deliveries, showEndpoint, expanded) {
  if (deliveries.length === 0) return h('p', { class: 'muted' }, 'No deliveries.');
  const head = ['Created', 'Event type', 'Status', 'Attempts', 'Next attempt'];
  if (showEndpoint) head.push('Endpoint');
  head.push('');
  const body = h('tbody');
  for (const d of deliveries) {
    const kept = expanded.get(d.id);
    const open = h('button', { type: 'button', class: 'secondary', 'aria-expanded': String(Boolean(kept)) }, 'Attempts');
    const row = h('tr', { 'data-delivery-id': d.id },
      h('td', { 'data-label': 'Created' }, time(d.created_at)),
      h('td', { 'data-label': 'Event type' }, h('a', { href: `#/events/${enc(d.event_id)}` }, d.event_type), d.test && ' ', d.test && h('span', { class: 'badge' }, 'test')),
      h('td', { 'data-label': 'Status' }, badge(d.status)),
      h('td', { 'data-label': 'Attempts' }, String(d.attempt_count)),
      h('td', { 'data-label': 'Next attempt' }, time(d.next_attempt_at)),
      showEndpoint && h('td', { 'data-label': 'Endpoint' }, h('a', { href: `#/endpoints/${enc(d.subscription_id)}` }, 'Open endpoint')),
      h('td', null, open));
    const detailCell = kept || h('td', { colspan: String(head.length) });
    const detailRow = h('tr', { class: 'delivery-detail-row', hidden: !kept }, detailCell);
    open.addEventListener('click', () => {
      const opening = detailRow.hidden;
      detailRow.hidden = !opening;
      open.setAttribute('aria-expanded', String(opening));
      if (opening) {
        expanded.set(d.id, detailCell);
        busy(open, () => loadDelivery(d.id, detailCell));
      } else {
        expanded.delete(d.id);
      }
    });
    body.append(row, detailRow);
  }
  return h('table', { class: 'stackable' },
    h('thead', null, h('tr', null, head.map((c) => h('th', { scope: 'col' }, c)))), body);
}

// syncRow brings the list's row of delivery d up to date with what its
// detail just read (a resend adds an attempt and may end it), so that the
// row and its open detail never disagree.
function syncRow(detailCell, d) {
  const row = detailCell.closest('tr')?.previousElementSibling;
  if (!row || row.dataset.deliveryId !== d.id) return;
  const cell = (label) => row.querySelector(`td[data-label="${label}"]`);
  cell('Status')?.replaceChildren(badge(d.status));
  cell('Attempts')?.replaceChildren(String(d.attempt_count));
  cell('Next attempt')?.replaceChildren(time(d.next_attempt_at));
}

// detailLoads numbers the loads of each detail cell: only the latest one
// draws it, so that a slow answer never replaces a newer one.
const detailLoads = new WeakMap();

async function loadDelivery(id, into) {
  const load = (detailLoads.get(into) || 0) + 1;
  detailLoads.set(into, load);
  let d;
  try {
    d = await state.api.get(`/webhook_deliveries/${enc(id)}`);
  } catch (err) {
    if (detailLoads.get(into) === load) into.replaceChildren(h('p', { class: 'notice error' }, describe(err)));
    return;
  }
  if (detailLoads.get(into) !== load) return;
  syncRow(into, d);
  // A broker's answer takes the place of the HTTP status and body; a
  // batched attempt shows its batch (attemptanswer.js).
  const answer = answerColumns(d.attempts);
  const batched = hasBatch(d.attempts);
  const rows = d.attempts.map((a) => {
    const [status, body] = answerCells(a, answer);
    return h('tr', null,
      h('td', { 'data-label': 'Attempt' }, String(a.number)),
      h('td', { 'data-label': 'Trigger' }, a.trigger),
      h('td', { 'data-label': 'Result' }, badge(a.status)),
      status,
      h('td', { 'data-label': 'Error' }, a.error || '—'),
      h('td', { 'data-label': 'Duration' }, `${a.duration_ms} ms`),
      h('td', { 'data-label': 'Time' }, time(a.attempted_at)),
      body,
      batched && batchCell(a));
  });
  const box = h('div', { class: 'delivery-detail', 'aria-label': `Delivery ${d.id}` },
    facts([['Delivery', h('code', null, d.id)], ['Status', badge(d.status)], ['Next attempt', time(d.next_attempt_at)]]),
    d.attempts.length === 0
      ? h('p', { class: 'muted' }, 'No attempt yet.')
      : h('table', { class: 'stackable attempts' },
        h('thead', null, h('tr', null, ['Attempt', 'Trigger', 'Result', answer[0], 'Error', 'Duration', 'Time', answer[1], ...(batched ? ['Batch'] : [])].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', null, rows)),
    d.attempts.map(requestHeaders), d.attempts.map(sentBody));
  const actions = h('div', { class: 'actions' });
  if (can('resend')) {
    const resend = h('button', { type: 'button' }, 'Resend');
    resend.addEventListener('click', () => busy(resend, async () => {
      try {
        await state.api.post(`/webhook_deliveries/${enc(d.id)}/redeliver`);
        flash('ok', 'Resent: a worker makes one more attempt now.');
        setTimeout(() => loadDelivery(id, into), 1000);
      } catch (err) {
        showError(err);
      }
    }));
    actions.append(resend);
  }
  const again = h('button', { type: 'button', class: 'secondary' }, 'Reload attempts');
  again.addEventListener('click', () => busy(again, () => loadDelivery(id, into)));
  actions.append(again);
  box.append(actions);
  // A redraw must not take the focus from the button the person is on.
  const focused = into.contains(document.activeElement) ? document.activeElement.textContent : null;
  into.replaceChildren(box);
  const sameButton = focused && [...actions.querySelectorAll('button')].find((b) => b.textContent === focused);
  if (sameButton) sameButton.focus({ preventScroll: true });
}

// ---- events ---------------------------------------------------------------

async function eventList(view) {
  const types = await eventTypes();
  const browse = { cursors: [undefined], page: 0, type: '', since: '', outcome: '' };
  let typeInput;
  if (types) {
    typeInput = h('select', { id: 'event-type' }, h('option', { value: '' }, 'Any'),
      [...types.map((t) => t.name), ...(types.some((t) => t.name === 'ping.test') ? [] : ['ping.test'])].map((n) => h('option', { value: n }, n)));
  } else {
    typeInput = h('input', { id: 'event-type', type: 'text', placeholder: 'payout.paid' });
  }
  const since = h('input', { id: 'event-since', type: 'datetime-local', step: '1' });
  const outcome = h('select', { id: 'event-outcome' }, h('option', { value: '' }, 'Any'),
    ['failed', 'pending', 'succeeded'].map((s) => h('option', { value: s }, s)));
  const form = h('form', { class: 'inline', 'aria-label': 'Filter events' },
    h('label', { for: 'event-type' }, 'Event type', typeInput),
    h('label', { for: 'event-since' }, 'Created since', since),
    h('label', { for: 'event-outcome' }, 'A delivery', outcome),
    h('button', { type: 'submit' }, 'Apply'));
  const list = h('div', { class: 'table-wrap' });
  const newer = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Newer');
  const older = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Older');

  async function reload() {
    // A page filtered on a rare outcome may be empty while more follow:
    // follow the cursor a few times before showing nothing.
    let page;
    const shown = [];
    let cursor = browse.cursors[browse.page];
    for (let hops = 0; hops < 10; hops++) {
      page = await state.api.get('/events', {
        event_type: browse.type, 'created_at.gte': browse.since, delivery_status: browse.outcome, limit: pageSize, cursor,
      });
      shown.push(...page.data);
      if (shown.length > 0 || !page.has_more) break;
      cursor = page.next_cursor;
    }
    page = { ...page, data: shown };
    browse.cursors[browse.page + 1] = page.has_more ? page.next_cursor : undefined;
    newer.hidden = browse.page === 0;
    older.hidden = !page.has_more;
    if (page.data.length === 0) {
      list.replaceChildren(h('p', { class: 'muted' }, 'No events.'));
      return;
    }
    list.replaceChildren(h('table', { class: 'stackable' },
      h('thead', null, h('tr', null, ['Created', 'Type', 'Event'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, page.data.map((e) => h('tr', null,
        h('td', { 'data-label': 'Created' }, time(e.created_at)),
        // ping.test comes from send_test_event and Check my endpoint, not
        // from money moving: marked as the deliveries list marks it.
        h('td', { 'data-label': 'Type' }, e.type, e.type === 'ping.test' && ' ', e.type === 'ping.test' && h('span', { class: 'badge' }, 'test')),
        h('td', { 'data-label': 'Event', class: 'break' }, h('a', { href: `#/events/${enc(e.id)}` }, e.id)))))));
  }
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    browse.type = typeInput.value.trim();
    browse.since = localToRFC3339(since.value);
    browse.outcome = outcome.value;
    browse.cursors = [undefined];
    browse.page = 0;
    reload().catch(showError);
  });
  newer.addEventListener('click', () => { browse.page--; busy(newer, () => reload().catch(showError)); });
  older.addEventListener('click', () => { browse.page++; busy(older, () => reload().catch(showError)); });
  view.append(h('h1', null, 'Events'), form, list, h('div', { class: 'pager' }, newer, older));
  await reload();
}

async function eventDetail(view, id) {
  const { json: ev, text } = await state.api.request('GET', `/events/${enc(id)}`, { raw: true });
  const payload = rawField(text, 'payload');
  const deliveries = deliveriesBrowser({ event_id: ev.id }, { filters: false, showEndpoint: true });
  view.append(
    h('p', null, h('a', { href: '#/events' }, '← All events')),
    h('h1', null, ev.type),
    h('section', { class: 'card', 'aria-label': 'Event' },
      facts([['Event', h('code', null, ev.id)], ['API version', ev.api_version], ['Created', time(ev.created_at)]]),
      h('h2', null, 'Payload'),
      ev.payload && ev.payload.erased === true && h('p', { class: 'muted' }, 'This event\'s content was erased at ', time(ev.payload.erased_at), '.'),
      h('pre', { tabindex: '0', 'aria-label': 'Payload' }, payload === null ? JSON.stringify(ev.payload, null, 2) : indent(payload))),
    h('h2', null, 'Deliveries'), deliveries);
  await deliveries.reload();
}

// ---- catalogue ------------------------------------------------------------

async function catalogue(view) {
  const types = await eventTypes();
  view.append(h('h1', null, 'Event types'));
  if (!types) {
    view.append(h('p', { class: 'notice' }, 'This engine does not publish its event catalogue.'));
    return;
  }
  view.append(h('p', null, 'Every type of event your endpoints can receive, with an example of its payload.'));
  // In the sandbox a person who manages endpoints can send any type's
  // example to their endpoints (the API's trigger; ping.test goes to one
  // endpoint at a time, from the endpoint's page).
  const sendable = can('manage_endpoints') && state.session.environment !== 'live';
  for (const t of types) {
    const section = h('section', { class: 'card', 'aria-label': t.name },
      h('h2', null, h('code', null, t.name)),
      h('p', null, t.description),
      h('details', null, h('summary', null, 'Example payload'),
        h('pre', { tabindex: '0' }, JSON.stringify(t.example, null, 2))));
    if (sendable && t.name !== 'ping.test') section.append(h('div', { class: 'actions' }, sendExample(t.name)));
    view.append(section);
  }
}

// sendExample is the button that publishes an example event of type to
// the merchant's endpoints that take it.
function sendExample(type) {
  const send = h('button', { type: 'button', class: 'secondary' }, 'Send an example');
  send.addEventListener('click', () => busy(send, async () => {
    try {
      const ev = await state.api.post(`/event_types/${enc(type)}/trigger`);
      flash('ok', `Sent ${type} (event ${ev.id}) to your endpoints that take it.`);
    } catch (err) {
      showError(err);
    }
  }));
  return send;
}

// A new link opened in a tab that shows the portal already changes only
// the fragment: take its token and start again on it.
window.addEventListener('hashchange', () => {
  if (/^#token=/.test(location.hash)) {
    takeToken();
    location.reload();
  }
});

boot().catch((err) => {
  main.replaceChildren(h('h1', null, 'The portal could not start'), h('p', { class: 'notice error', role: 'alert' }, describe(err)));
});
