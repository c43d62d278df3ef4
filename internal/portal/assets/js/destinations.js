// Destinations on the endpoint pages: where a subscription's deliveries
// go, an HTTP endpoint (its url), a broker or service (its destination),
// or nowhere (a poll subscription, read by the merchant's server). The
// name every page gives an endpoint (endpointName, kindLabel), the
// detail's facts (destinationFacts) and the form's part
// (destinationFieldset); app.js places them.
//
// Nothing here is written for one kind: every kind of the server's
// registry is drawn from its metadata, which the session lists
// (GET /v1/portal_sessions/current, destination_kinds: type, label,
// short, delivers, fields), so that a new kind needs no portal code.
// Only the two kinds outside the registry are the portal's own: webhook,
// whose field is the form's URL, and poll, which has none.
//
// A destination's credentials (fields marked secret: a password, a key,
// a URL holding a password) go to the API and are never shown: reads
// mask them, the facts leave them out, the form's inputs for them start
// empty, and a target is shown without its user and password.

import { h } from './dom.js';

// webhookLabel is how the portal names an HTTP endpoint's kind.
const webhookLabel = 'HTTP endpoint';

// kindOf is a subscription's destination type: 'webhook' for an HTTP
// endpoint.
export function kindOf(sub) {
  return sub && sub.destination && sub.destination.type ? sub.destination.type : 'webhook';
}

// isBroker tells whether a subscription delivers somewhere else than an
// HTTP endpoint.
export function isBroker(sub) {
  return kindOf(sub) !== 'webhook';
}

// metadataOf is the registry's metadata of type among kinds (the
// session's destination_kinds), or null when the session does not list
// it (the operator turned it off, or the server is older).
function metadataOf(kinds, type) {
  return (kinds || []).find((k) => k && k.type === type) || null;
}

// withoutUserinfo drops user:password@ from a URL: a target as older
// servers read it shows the user and a masked password, and the portal
// shows neither.
function withoutUserinfo(url) {
  return String(url || '').replace(/^([a-z][a-z0-9+.-]*:\/\/)[^@/?#]*@/i, '$1');
}

// targetText is where a subscription's deliveries go, in a few words:
// its URL (the API's target: for a broker or service, where it connects,
// without credentials).
export function targetText(sub) {
  switch (kindOf(sub)) {
    case 'webhook':
      return sub.url;
    case 'poll':
      return 'read by your server';
    default:
      return withoutUserinfo(sub.url || (sub.destination && sub.destination.type) || '');
  }
}

// kindLabel is the small label naming a destination's kind, drawn from
// kinds (the session's destination_kinds); null for an HTTP endpoint,
// which needs none. A kind the session does not describe shows its type.
export function kindLabel(sub, kinds) {
  const kind = kindOf(sub);
  if (kind === 'webhook') return null;
  const meta = metadataOf(kinds, kind);
  return h('span', { class: `badge kind kind-${kind}`, title: meta ? meta.label : kind }, meta ? meta.short || meta.label : kind);
}

// endpointName is how the portal names an endpoint: its kind's label
// (all but HTTP endpoints) and its target.
export function endpointName(sub, kinds) {
  const label = kindLabel(sub, kinds);
  return label ? [label, ' ', targetText(sub)] : [sub.url];
}

// code shows a value the merchant set, as they set it.
const code = (s) => h('code', { class: 'break' }, s);

// hasValue tells whether a summary's value is worth a fact: a boolean
// always is, a list or string when not empty, an object when one of its
// members not secret has one.
function hasValue(field, v) {
  if (v === undefined || v === null) return false;
  switch (field.type) {
    case 'boolean':
      return typeof v === 'boolean';
    case 'strings':
      return Array.isArray(v) ? v.length > 0 : String(v) !== '';
    case 'object':
      return typeof v === 'object' && (field.fields || []).some((m) => !m.secret && hasValue(m, v[m.name]));
    default:
      return String(v) !== '';
  }
}

// factValue shows a summary's value of field (hasValue holds).
function factValue(field, v) {
  switch (field.type) {
    case 'boolean':
      return v ? 'Yes' : 'No';
    case 'strings':
      return code(Array.isArray(v) ? v.join(', ') : String(v));
    case 'object': {
      const pairs = (field.fields || []).filter((m) => !m.secret && hasValue(m, v[m.name]))
        .map((m) => [`${m.label}: `, m.type === 'boolean' ? factValue(m, v[m.name]) : code(memberText(m, v[m.name]))]);
      return pairs.flatMap((p, i) => (i === 0 ? p : [', ', ...p]));
    }
    default:
      return code(String(v));
  }
}

// memberText is an object member's value as text.
function memberText(field, v) {
  if (field.type === 'strings' && Array.isArray(v)) return v.join(', ');
  if (field.type === 'object') return JSON.stringify(v);
  return String(v);
}

// destinationFacts are the detail's [label, value] pairs for where sub's
// deliveries go: what the kind delivers, then each field of its summary
// that is set and is not a credential.
export function destinationFacts(sub, kinds) {
  const kind = kindOf(sub);
  if (kind === 'webhook') return [['Delivers to', 'An HTTP endpoint (the URL above)']];
  if (kind === 'poll') {
    return [['Delivers to', [kindLabel(sub, kinds), ' nothing is sent: your server reads the deliveries and acknowledges them']]];
  }
  const meta = metadataOf(kinds, kind);
  if (!meta) return [['Delivers to', [kindLabel(sub, kinds), ' ', targetText(sub)]]];
  const d = sub.destination || {};
  const out = [['Delivers to', [kindLabel(sub, kinds), ' ', meta.delivers || targetText(sub)]]];
  for (const f of meta.fields || []) {
    if (!f.secret && hasValue(f, d[f.name])) out.push([f.label, factValue(f, d[f.name])]);
  }
  return out;
}

// FieldError is a mistake the form finds itself, with the field it is
// about: fielderrors.js shows it there.
export class FieldError extends Error {
  constructor(field, message) {
    super(message);
    this.field = field;
  }
}

// credentialAgain is what an empty credential of a changed destination
// is told: the API replaces a destination whole, and the form cannot send
// a credential it was never shown.
const credentialAgain = 'A changed destination replaces the whole one: enter its credential again (it is never shown, so it cannot be kept).';

// isSet tells whether a summary has a value for a field (for a secret:
// that one is set, masked).
function isSet(v) {
  return v !== undefined && v !== null && v !== '' && !(Array.isArray(v) && v.length === 0);
}

// fieldControl is the form's control of one field and what it knows:
// node (the label, or the fieldset of an object), shown (what it shows
// of the destination, credentials aside), typed (a credential was
// entered), filled (it holds a value) and read (its value for the
// request, after checking it; undefined when it sends nothing).
//
// meta is the field's metadata; value is the summary's value (null when
// creating or for another kind); id and param name it (dest-<type>-<field>,
// destination.<field>; a member's: dest-<type>-<field>-<member>,
// destination.<field>.<member>); within is the label of the object that
// holds it, if any; edit tells whether the destination read is this
// kind's, so that a credential it has counts as set.
function fieldControl(meta, value, id, param, within, edit) {
  if (meta.type === 'object') return objectControl(meta, value, id, param, within, edit);
  const label = meta.label || meta.name;
  const named = within ? `${within} ${label}` : label;
  const secret = Boolean(meta.secret);
  const set = secret && edit && isSet(value);
  const shownValue = secret || value === undefined || value === null ? ''
    : (meta.type === 'strings' && Array.isArray(value) ? value.join(', ') : String(value));
  let control;
  if (meta.type === 'boolean') {
    control = h('input', { id, type: 'checkbox', 'data-param': param, checked: value === true });
  } else if (meta.choices && meta.choices.length > 0) {
    // An optional field, or a member of an object (which may be left out
    // whole), may be left empty: its None choice.
    const choices = (meta.required && !within ? [] : [['', 'None']]).concat(meta.choices.map((c) => [c, c]));
    control = h('select', { id, 'data-param': param },
      choices.map(([v, text]) => h('option', { value: v, selected: v === shownValue }, text)));
  } else if (meta.type === 'text') {
    control = h('textarea', { id, 'data-param': param, rows: '6', spellcheck: 'false', autocomplete: 'off',
      placeholder: meta.example || undefined, value: shownValue });
  } else {
    control = h('input', { id, 'data-param': param, autocomplete: secret ? 'new-password' : 'off',
      type: secret ? 'password' : 'text', spellcheck: 'false', placeholder: meta.example || undefined, value: shownValue });
  }
  const hint = [meta.help, meta.type === 'strings' ? 'Comma-separated.' : null].filter(Boolean).join(' ');
  const node = meta.type === 'boolean'
    ? h('label', { for: id, class: 'check' }, control, label, hint && h('span', { class: 'muted' }, hint))
    : h('label', { for: id }, secret ? `${label} (never shown again)` : label,
      hint && h('span', { class: 'muted' }, hint),
      set && h('span', { class: 'muted' }, 'One is set: leave this empty to keep the destination as it is.'),
      control);
  const text = () => (meta.type === 'text' ? control.value : control.value.trim());
  const filled = () => {
    if (meta.type === 'boolean') return control.checked;
    if (meta.type === 'strings') return control.value.split(',').some((s) => s.trim() !== '');
    return text() !== '';
  };
  return {
    node,
    shown: () => (secret ? null : meta.type === 'boolean' ? control.checked : control.value),
    typed: () => secret && control.value !== '',
    filled,
    read() {
      if (!filled()) {
        if (set) throw new FieldError(control, credentialAgain);
        if (meta.required && meta.type !== 'boolean') {
          throw new FieldError(control, `${control.tagName === 'SELECT' ? 'Choose' : 'Enter'} ${named}.`);
        }
        return undefined; // optional and empty, or false: not sent
      }
      if (meta.type === 'boolean') return true;
      if (meta.type === 'strings') return control.value.split(',').map((s) => s.trim()).filter(Boolean);
      return text();
    },
  };
}

// objectControl is an object field's control: a fieldset of its
// members, sent when one of them is filled (then whole, its required
// members checked).
function objectControl(meta, value, id, param, within, edit) {
  const label = meta.label || meta.name;
  const v = value && typeof value === 'object' ? value : {};
  const members = (meta.fields || []).map((m) => ({
    name: m.name,
    control: fieldControl(m, v[m.name], `${id}-${m.name}`, `${param}.${m.name}`, within ? `${within} ${label}` : label, edit),
  }));
  const node = h('fieldset', { class: 'controls', 'data-param': param, 'aria-label': label },
    h('legend', null, label),
    meta.help && h('p', { class: 'muted' }, meta.help),
    members.map((m) => m.control.node));
  const filled = () => members.some((m) => m.control.filled());
  return {
    node,
    shown: () => members.map((m) => m.control.shown()),
    typed: () => members.some((m) => m.control.typed()),
    filled,
    read() {
      if (!filled()) {
        if (meta.required) throw new FieldError(members[0] ? members[0].control.node.querySelector('input, select, textarea') : node, `Enter ${label}.`);
        return undefined; // none of it filled: not sent, a credential set in it included
      }
      const out = {};
      for (const m of members) {
        const mv = m.control.read();
        if (mv !== undefined) out[m.name] = mv;
      }
      return out;
    },
  };
}

// kindPart is the form's part for a kind of the registry, drawn from its
// metadata; d is the destination read (null when creating, or when sub
// is of another kind).
function kindPart(meta, d) {
  const edit = Boolean(d);
  const fields = (meta.fields || []).map((f) => ({
    name: f.name,
    control: fieldControl(f, d ? d[f.name] : undefined, `dest-${meta.type}-${f.name}`, `destination.${f.name}`, '', edit),
  }));
  const node = h('div', { class: 'stack' }, fields.map((f) => f.control.node));
  return {
    node,
    shown: () => JSON.stringify(fields.map((f) => f.control.shown())),
    typed: () => fields.some((f) => f.control.typed()),
    read() {
      const out = { type: meta.type };
      for (const f of fields) {
        const v = f.control.read();
        if (v !== undefined) out[f.name] = v;
      }
      return out;
    },
  };
}

// destinationFieldset is the form's "Deliver to" section for sub (null
// when creating). allowed are the types the server lets a subscription
// use (the session's destinations; null for an engine that does not say,
// which then offers HTTP endpoints alone); kinds are the metadata of the
// allowed kinds of the registry (the session's destination_kinds), in
// the order the form offers them after HTTP endpoints; urlLabel is the
// form's URL field, shown for an HTTP endpoint only. read(url) answers
// what goes in the create or update body for where deliveries go.
//
// On update the API replaces a destination whole: a destination left as
// it is goes unsent, which keeps it, credentials included; one that
// changes is sent whole, so its credentials must be entered again.
export function destinationFieldset(sub, allowed, kinds, urlLabel) {
  const current = kindOf(sub);
  const registry = (kinds || []).filter((k) => k && k.type && k.type !== 'webhook' && k.type !== 'poll');
  const offered = [];
  if (current === 'webhook' || (allowed ? allowed.includes('webhook') : true)) offered.push('webhook');
  for (const k of registry) offered.push(k.type);
  // A kind the session does not describe (turned off, or poll) is
  // offered as it is, so that an edit never turns it into something else.
  if (!offered.includes(current)) offered.push(current);
  const labelOf = (k) => {
    if (k === 'webhook') return webhookLabel;
    const meta = metadataOf(registry, k);
    return meta ? meta.label : `Keep as it is (${k})`;
  };
  const kind = h('select', { id: 'endpoint-kind', name: 'destination_type', 'data-param': 'destination' },
    offered.map((k) => h('option', { value: k, selected: k === current }, labelOf(k))));
  const parts = {};
  for (const meta of registry) parts[meta.type] = kindPart(meta, meta.type === current && sub ? sub.destination || {} : null);
  const boxes = Object.entries(parts).map(([k, p]) => {
    p.node.dataset.kind = k;
    return p.node;
  });
  const shownAtStart = parts[current] ? parts[current].shown() : null;
  const show = () => {
    for (const b of boxes) b.hidden = b.dataset.kind !== kind.value;
    urlLabel.hidden = kind.value !== 'webhook';
  };
  kind.addEventListener('change', show);
  show();
  const node = h('fieldset', { class: 'controls', 'aria-label': 'Deliver to' }, h('legend', null, 'Deliver to'),
    h('label', { for: 'endpoint-kind' }, 'Where deliveries go', kind),
    offered.length === 1 && offered[0] === 'webhook' && h('p', { class: 'muted' }, 'This server delivers to HTTP endpoints only.'),
    boxes);

  const read = (url) => {
    if (kind.value === 'webhook') {
      if (!url) throw new FieldError(urlLabel.querySelector('input'), 'Enter the URL that receives the webhooks.');
      // Back from another kind: the destination goes with the URL.
      return current === 'webhook' ? { url } : { url, destination: null };
    }
    const part = parts[kind.value];
    if (!part) return {}; // a kind the session does not describe, kept as it is
    if (sub && kind.value === current && part.shown() === shownAtStart && !part.typed()) {
      return {}; // left as it is: kept whole, credentials included
    }
    return { destination: part.read() };
  };
  return { node, read, kind: () => kind.value };
}
