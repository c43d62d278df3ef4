// The replay page (#/replay): "Replay failed deliveries in a time range".
// The merchant picks a window and optional filters, sees how many
// deliveries a replay would attempt (POST /webhook_deliveries/replay with
// dry_run), confirms, then follows the replay's progress
// (GET /replays/{id}) until it completes.

import { h, time, localToRFC3339, busy } from './dom.js';

// pollEvery is how often a running replay's progress is read again.
const pollEvery = 1000;

function select(id, options) {
  return h('select', { id }, options.map(([value, label]) => h('option', { value }, label)));
}

// toLocalInput is a Date as a datetime-local input's value, in the
// reader's zone, to the second.
function toLocalInput(d) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// progressView shows a replay's counts and, once it completes, says so.
function progressView(r) {
  const done = r.completed_at !== null;
  const bar = h('progress', { max: String(Math.max(r.matched, 1)), value: String(done ? Math.max(r.matched, 1) : r.attempted) });
  return h('section', { 'aria-label': 'Replay progress', id: 'replay-progress' },
    h('h2', null, done ? 'Replay complete' : 'Replay running'),
    bar,
    h('p', null, `${r.attempted} of ${r.matched} ${r.matched === 1 ? 'delivery' : 'deliveries'} attempted: `,
      `${r.succeeded} succeeded, ${r.failed} failed.`),
    h('p', { class: 'muted' }, 'Started ', time(r.created_at), done ? ['; completed ', time(r.completed_at), '.'] : '.'));
}

// replayPage draws the form on view; k is the portal's kit.
export async function replayPage(view, k) {
  view.append(h('h1', null, 'Replay failed deliveries in a time range'));
  if (!k.can('resend')) {
    view.append(h('p', { class: 'notice' }, 'This session may not resend deliveries.'));
    return;
  }
  const [subs, types] = await Promise.all([
    k.listAll('/webhook_subscriptions'),
    k.api.get('/event_types').then((r) => r.data, () => []),
  ]);
  const now = new Date();
  const since = h('input', { id: 'replay-since', type: 'datetime-local', required: true, step: '1', value: toLocalInput(new Date(now - 3600e3)) });
  const until = h('input', { id: 'replay-until', type: 'datetime-local', required: true, step: '1', value: toLocalInput(now) });
  const endpoint = select('replay-endpoint', [['', 'Every endpoint'], ...subs.map((s) => [s.id, s.url || s.description || s.id])]);
  const eventType = select('replay-event-type', [['', 'Every event type'], ...types.map((t) => [t.name, t.name])]);
  const status = select('replay-status', [['failed', 'Failed'], ['skipped', 'Skipped (endpoint was disabled)'], ['succeeded', 'Succeeded'], ['', 'Any status']]);
  const answer = select('replay-answer', [['', 'Any answer'], ['5xx', '5xx server error'], ['4xx', '4xx client error'], ['none', 'No answer (network error or timeout)']]);
  const count = h('button', { type: 'submit' }, 'Count deliveries');
  const found = h('div', { 'aria-live': 'polite' });
  const progress = h('div', { 'aria-live': 'polite' });
  const form = h('form', { novalidate: true },
    h('p', { class: 'muted' }, 'Each delivery the filters select gets one more attempt, with the same webhook-id and fresh signatures, a few at a time. One replay runs at a time.'),
    h('label', { for: 'replay-since' }, 'From', since),
    h('label', { for: 'replay-until' }, 'To', until),
    h('label', { for: 'replay-endpoint' }, 'Endpoint', endpoint),
    h('label', { for: 'replay-event-type' }, 'Event type', eventType),
    h('label', { for: 'replay-status' }, 'Delivery status', status),
    h('label', { for: 'replay-answer' }, 'Last answer', answer),
    h('div', { class: 'actions' }, count));
  view.append(form, found, progress);

  const body = () => {
    const b = { since: localToRFC3339(since.value), until: localToRFC3339(until.value) };
    if (endpoint.value) b.subscription_id = endpoint.value;
    if (eventType.value) b.event_type = eventType.value;
    if (status.value) b.status = status.value;
    if (answer.value) b.http_status_class = answer.value;
    return b;
  };
  // A count is for the filters it was made with: any change asks again.
  for (const input of [since, until, endpoint, eventType, status, answer]) {
    input.addEventListener('change', () => found.replaceChildren());
  }

  const follow = async (id) => {
    if (!view.isConnected && !progress.isConnected) return;
    try {
      const r = await k.api.get(`/replays/${encodeURIComponent(id)}`);
      progress.replaceChildren(progressView(r));
      if (r.completed_at === null) setTimeout(() => { if (progress.isConnected) follow(id); }, pollEvery);
    } catch (err) {
      k.showError(err);
    }
  };

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const b = body();
    if (!b.since || !b.until) { k.flash('error', 'Choose the start and the end of the time range.'); since.focus(); return; }
    busy(count, async () => {
      try {
        const est = await k.api.post('/webhook_deliveries/replay', { ...b, dry_run: true });
        const n = est.matched;
        if (n === 0) {
          found.replaceChildren(h('p', { class: 'notice' }, 'No delivery in this time range matches these filters.'));
          return;
        }
        const confirm = h('button', { type: 'button' }, `Replay ${n} ${n === 1 ? 'delivery' : 'deliveries'}`);
        found.replaceChildren(h('div', { class: 'notice warn', role: 'group', 'aria-label': 'Confirm the replay' },
          h('p', null, est.capped ? `More than ${n} deliveries match: narrow the time range.`
            : `${n} ${n === 1 ? 'delivery' : 'deliveries'} will get another attempt.`),
          !est.capped && h('div', { class: 'actions' }, confirm)));
        confirm.addEventListener('click', () => busy(confirm, async () => {
          try {
            const r = await k.api.post('/webhook_deliveries/replay', b);
            found.replaceChildren();
            progress.replaceChildren(progressView(r));
            follow(r.id);
          } catch (err) {
            k.showError(err);
          }
        }));
        confirm.focus();
      } catch (err) {
        k.showError(err);
      }
    });
  });
}
