// The transformation editor on an endpoint's page: the merchant's
// handler that reshapes each delivery before it is sent
// (docs/transformations.md). Code, a template to start from, the event to
// try it on, Simulate (nothing sent: the input and what the handler made,
// side by side, or the line where it failed) and Save. app.js places it.

import { h, busy } from './dom.js';
import { indent } from './json.js';

const blank = `// Reshape each delivery: change webhook.payload (the body), webhook.url,
// webhook.headers, or set webhook.cancel = true to skip it.
function handler(webhook) {
  return webhook;
}
`;

// side is one column of a simulation: a body, a URL and headers.
function side(title, s) {
  return h('section', { class: 'simulated', 'aria-label': title },
    h('h3', null, title),
    s.url ? h('p', null, 'URL ', h('code', null, s.url)) : null,
    Object.keys(s.headers || {}).length ? h('p', null, 'Headers ', h('code', null, JSON.stringify(s.headers))) : null,
    h('pre', { class: 'json' }, indent(JSON.stringify(s.payload))));
}

// transformationEditor is the "Transformation" section of sub's page. ui
// holds the page's api, showError, the catalogue's event types and the
// templates to start from (the session's transformation_templates:
// name, title, code); saved(message) redraws the page after a change,
// the message over it.
export function transformationEditor(sub, ui, saved) {
  const t = sub.transformation;
  const code = h('textarea', { id: 'transformation-code', rows: '14', spellcheck: 'false', autocomplete: 'off', class: 'code' });
  code.value = t ? t.code : blank;
  const enabled = h('input', { id: 'transformation-enabled', type: 'checkbox', checked: t ? t.enabled : true });
  const template = h('select', { id: 'transformation-template' },
    h('option', { value: '' }, 'Start from a template…'),
    (ui.templates || []).map((t) => h('option', { value: t.name }, t.title)));
  template.addEventListener('change', () => {
    const found = (ui.templates || []).find((t) => t.name === template.value);
    if (found) code.value = found.code;
  });
  const types = (ui.eventTypes || []).filter((e) => e !== 'ping.test');
  const eventType = h('select', { id: 'transformation-event-type' },
    [...types, 'ping.test'].map((e) => h('option', { value: e }, e)));
  const eventID = h('input', { id: 'transformation-event-id', type: 'text', autocomplete: 'off', placeholder: 'or one of your event ids' });
  const result = h('div', { class: 'simulation', 'aria-live': 'polite', 'aria-label': 'Simulation' });

  const simulate = h('button', { type: 'button' }, 'Simulate');
  simulate.addEventListener('click', () => busy(simulate, async () => {
    const body = { code: code.value };
    if (eventID.value.trim()) body.event_id = eventID.value.trim();
    else body.event_type = eventType.value;
    try {
      const s = await ui.api.post(`/webhook_subscriptions/${encodeURIComponent(sub.id)}/transformation/simulate`, body);
      result.replaceChildren(...simulation(s));
    } catch (err) {
      result.replaceChildren();
      ui.showError(err);
    }
  }));
  const save = h('button', { type: 'button' }, 'Save');
  save.addEventListener('click', () => busy(save, async () => {
    try {
      await ui.api.post(`/webhook_subscriptions/${encodeURIComponent(sub.id)}`,
        { transformation: { code: code.value, enabled: enabled.checked } });
      saved('Transformation saved: the next attempts run it.');
    } catch (err) {
      ui.showError(err);
    }
  }));
  const actions = h('div', { class: 'actions' }, simulate, save);
  if (t) {
    const remove = h('button', { type: 'button', class: 'secondary' }, 'Remove');
    remove.addEventListener('click', () => busy(remove, async () => {
      try {
        await ui.api.post(`/webhook_subscriptions/${encodeURIComponent(sub.id)}`, { transformation: null });
        saved('Transformation removed: deliveries are sent as they are.');
      } catch (err) {
        ui.showError(err);
      }
    }));
    actions.append(remove);
  }
  return h('section', { class: 'card', 'aria-label': 'Transformation' },
    h('h2', null, 'Transformation'),
    h('p', { class: 'muted' }, t
      ? `Version ${t.version}, ${t.enabled ? 'running on every delivery' : 'turned off'}.`
      : 'None: deliveries are sent as they are. A transformation reshapes each delivery before it is signed and sent.'),
    h('label', { for: 'transformation-template' }, 'Template', template),
    h('label', { for: 'transformation-code' }, 'Code', code),
    h('label', { for: 'transformation-enabled', class: 'inline' }, enabled, ' Run on deliveries'),
    h('div', { class: 'row' },
      h('label', { for: 'transformation-event-type', class: 'field' }, 'Try it on the example of', eventType),
      h('label', { for: 'transformation-event-id', class: 'field' }, 'Event id', eventID)),
    actions, result);
}

// simulation shows a simulate answer: where the code failed, or the input
// and the output side by side.
function simulation(s) {
  const took = `${s.run_time_ms.toFixed(1)} ms`;
  if (s.outcome === 'failed') {
    const where = s.error.line ? `Line ${s.error.line}, column ${s.error.column}: ` : '';
    return [h('p', { class: 'notice error', role: 'alert' }, `${where}${s.error.message}`),
      h('div', { class: 'side-by-side' }, side('Input', s.input))];
  }
  return [
    h('p', { class: 'muted' }, s.outcome === 'cancelled' ? `Cancelled: this delivery would be skipped (${took}).` : `Ran in ${took}.`),
    h('div', { class: 'side-by-side' }, side('Input', s.input), side('Output', s.output)),
  ];
}

// sentBody shows the body a transformed attempt sent, and the version of
// the transformation that made it; null for an attempt not transformed.
export function sentBody(attempt) {
  if (attempt.request_body === null || attempt.request_body === undefined) return null;
  return h('details', { class: 'sent-body', open: true },
    h('summary', null, `Body sent by attempt ${attempt.number} (transformation version ${attempt.transformation_version})`),
    h('pre', { class: 'json' }, indent(attempt.request_body)));
}
