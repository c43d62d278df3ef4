// Destinations on the endpoint pages: where a subscription's deliveries
// go, an HTTP endpoint (its url) or a message broker (its destination).
// The name every page gives an endpoint (endpointName, kindLabel), the
// detail's facts (destinationFacts) and the form's part (destinationFieldset);
// app.js places them.
//
// A broker's credentials (the AMQP password, the SASL password, the
// service account key, the AWS secret key) go to the API and are never
// shown: reads mask them, and this module shows no user name or password
// at all, not even masked.

import { h } from './dom.js';

// kinds are the destination types this portal knows, in the order the
// form offers them; the server says which of them it allows.
const kinds = {
  webhook: { label: 'HTTP endpoint', short: 'HTTP' },
  rabbitmq: { label: 'RabbitMQ', short: 'RabbitMQ' },
  kafka: { label: 'Kafka', short: 'Kafka' },
  gcp_pubsub: { label: 'Google Cloud Pub/Sub', short: 'Pub/Sub' },
  sqs: { label: 'Amazon SQS', short: 'SQS' },
};

// kindOf is a subscription's destination type: 'webhook' for an HTTP
// endpoint.
export function kindOf(sub) {
  return sub && sub.destination && sub.destination.type ? sub.destination.type : 'webhook';
}

// isBroker tells whether a subscription delivers to a broker.
export function isBroker(sub) {
  return kindOf(sub) !== 'webhook';
}

// withoutUserinfo drops user:password@ from a URL: an AMQP URL as read
// shows the user and a masked password, and the portal shows neither.
function withoutUserinfo(url) {
  return String(url || '').replace(/^([a-z][a-z0-9+.-]*:\/\/)[^@/?#]*@/i, '$1');
}

// quoted shows a name the broker knows, in quotes.
const quoted = (s) => `“${s}”`;

// targetText is where a subscription's deliveries go, in a few words:
// its URL for an HTTP endpoint; the exchange and routing key, the
// brokers and topic, the project and topic, or the queue URL of a broker.
export function targetText(sub) {
  const d = sub.destination || {};
  switch (kindOf(sub)) {
    case 'webhook':
      return sub.url;
    case 'rabbitmq':
      return (d.exchange ? `exchange ${quoted(d.exchange)}` : 'default exchange') +
        (d.routing_key ? `, routing key ${quoted(d.routing_key)}` : '') + ` on ${withoutUserinfo(d.url || sub.url)}`;
    case 'kafka':
      return `topic ${quoted(d.topic)} on ${(d.brokers || []).join(', ')}`;
    case 'gcp_pubsub':
      return `projects/${d.project_id}/topics/${d.topic_id}`;
    case 'sqs':
      return d.queue_url || sub.url;
    case 'poll':
      return 'read by your server';
    default:
      return withoutUserinfo(sub.url);
  }
}

// kindLabel is the small label naming a broker's kind; null for an HTTP
// endpoint, which needs none.
export function kindLabel(sub) {
  const kind = kindOf(sub);
  if (kind === 'webhook') return null;
  const known = kinds[kind];
  return h('span', { class: `badge kind kind-${kind}`, title: known ? known.label : kind }, known ? known.short : kind);
}

// endpointName is how the portal names an endpoint: its kind's label
// (brokers only) and its target.
export function endpointName(sub) {
  const label = kindLabel(sub);
  return label ? [label, ' ', targetText(sub)] : [sub.url];
}

// destinationFacts are the detail's [label, value] pairs for where sub's
// deliveries go.
export function destinationFacts(sub) {
  const d = sub.destination || {};
  const code = (s) => h('code', { class: 'break' }, s);
  switch (kindOf(sub)) {
    case 'webhook':
      return [['Delivers to', 'An HTTP endpoint (the URL above)']];
    case 'rabbitmq':
      return [['Delivers to', [kindLabel(sub), ' one persistent message per delivery, confirmed by the broker']],
        ['Broker', code(withoutUserinfo(d.url || sub.url))],
        ['Exchange', d.exchange ? code(d.exchange) : 'The default exchange'],
        ['Routing key', d.routing_key ? code(d.routing_key) : 'None']];
    case 'kafka':
      return [['Delivers to', [kindLabel(sub), ' one record per delivery, acknowledged by every in-sync replica']],
        ['Brokers', code((d.brokers || []).join(', '))],
        ['Topic', code(d.topic)],
        ['Connection', [d.tls ? 'TLS' : 'Plain TCP', d.sasl ? `, SASL ${d.sasl.mechanism}` : '']]];
    case 'gcp_pubsub':
      return [['Delivers to', [kindLabel(sub), ' Google Cloud Pub/Sub, one message per delivery']],
        ['Project', code(d.project_id)],
        ['Topic', code(d.topic_id)],
        d.client_email && ['Service account', code(d.client_email)],
        d.endpoint && ['Endpoint', code(d.endpoint)]].filter(Boolean);
    case 'sqs':
      return [['Delivers to', [kindLabel(sub), ' Amazon SQS, one message per delivery']],
        ['Queue URL', code(d.queue_url || sub.url)],
        ['Region', code(d.region)],
        d.endpoint && ['Endpoint', code(d.endpoint)]].filter(Boolean);
    case 'poll':
      return [['Delivers to', [kindLabel(sub), ' nothing is sent: your server reads the deliveries and acknowledges them']]];
    default:
      return [['Delivers to', [kindLabel(sub), ' ', withoutUserinfo(sub.url)]]];
  }
}

// input is a text-like control; param names the API field it sends, so
// that the API's refusal shows beside it (fielderrors.js).
function input(id, param, props) {
  return h('input', { id, 'data-param': param, autocomplete: 'off', ...props });
}

// labelled is a control with its label.
function labelled(id, label, control) {
  return h('label', { for: id }, label, control);
}

// secretInput is a credential's field: a password field, empty on an
// edit (the API never shows it).
function secretInput(id, param) {
  return input(id, param, { type: 'password', autocomplete: 'new-password' });
}

// secretLabel labels a credential's field, saying on an edit that one is
// set and how it is kept.
function secretLabel(id, label, control, isSet) {
  return h('label', { for: id }, label,
    isSet && h('span', { class: 'muted' }, 'One is set: leave this empty to keep the destination as it is.'), control);
}

// FieldError is a mistake the form finds itself, with the field it is
// about: fielderrors.js shows it there.
export class FieldError extends Error {
  constructor(field, message) {
    super(message);
    this.field = field;
  }
}

// splitAMQP parts an amqp(s) URL into the URL without its user and
// password, and the user (the password is never read back).
function splitAMQP(url) {
  const m = /^(amqps?:\/\/)(?:([^:@/]*)(?::[^@/]*)?@)?(.*)$/i.exec(url || '');
  if (!m) return { bare: url || '', user: '', hasPassword: false };
  return { bare: m[1] + m[3], user: m[2] ? decodeURIComponent(m[2]) : '', hasPassword: /^amqps?:\/\/[^@/]*:[^@/]*@/i.test(url) };
}

// rabbitFields is the form's RabbitMQ part.
function rabbitFields(d) {
  const split = splitAMQP(d && d.url);
  const url = input('dest-amqp-url', 'destination.url', { type: 'text', placeholder: 'amqps://broker.example.com/vhost', value: split.bare });
  const user = input('dest-amqp-user', 'destination.url', { type: 'text', value: split.user });
  const password = secretInput('dest-amqp-password', 'destination.url');
  const exchange = input('dest-amqp-exchange', 'destination.exchange', { type: 'text', value: (d && d.exchange) || '', placeholder: 'webhooks' });
  const routingKey = input('dest-amqp-routing-key', 'destination.routing_key', { type: 'text', value: (d && d.routing_key) || '', placeholder: 'payouts' });
  const node = h('div', { class: 'stack' },
    labelled('dest-amqp-url', 'Broker URL (amqp:// or amqps://, with the vhost; no user or password here)', url),
    labelled('dest-amqp-user', 'User name', user),
    secretLabel('dest-amqp-password', 'Password (never shown again)', password, split.hasPassword),
    labelled('dest-amqp-exchange', 'Exchange (empty: the default exchange)', exchange),
    labelled('dest-amqp-routing-key', 'Routing key (with the default exchange: the queue\'s name)', routingKey));
  return {
    node,
    shown: () => [url.value.trim(), user.value.trim(), exchange.value.trim(), routingKey.value.trim()].join('\n'),
    typed: () => password.value !== '',
    needsCredential: () => split.hasPassword && password.value === '',
    credentialField: password,
    read() {
      const bare = url.value.trim();
      if (!bare) throw new FieldError(url, 'Enter the broker\'s URL, such as amqps://broker.example.com/vhost.');
      const m = /^(amqps?:\/\/)(.*)$/i.exec(bare);
      if (!m) throw new FieldError(url, 'The broker\'s URL starts with amqp:// or amqps://.');
      if (/^[^/]*@/.test(m[2])) throw new FieldError(url, 'Put the user name and the password in their own fields, not in the URL.');
      let full = bare;
      if (user.value.trim() || password.value) {
        full = m[1] + encodeURIComponent(user.value.trim()) + (password.value ? ':' + encodeURIComponent(password.value) : '') + '@' + m[2];
      }
      const out = { type: 'rabbitmq', url: full };
      if (exchange.value.trim()) out.exchange = exchange.value.trim();
      if (routingKey.value.trim()) out.routing_key = routingKey.value.trim();
      return out;
    },
  };
}

// kafkaFields is the form's Kafka part.
function kafkaFields(d) {
  const sasl = d && d.sasl;
  const brokers = input('dest-kafka-brokers', 'destination.brokers', { type: 'text', value: ((d && d.brokers) || []).join(', '), placeholder: 'kafka-1.example.com:9092, kafka-2.example.com:9092' });
  const topic = input('dest-kafka-topic', 'destination.topic', { type: 'text', value: (d && d.topic) || '', placeholder: 'webhooks' });
  const tls = h('input', { id: 'dest-kafka-tls', type: 'checkbox', 'data-param': 'destination.tls', checked: Boolean(d && d.tls) });
  const mechanism = h('select', { id: 'dest-kafka-sasl', 'data-param': 'destination.sasl.mechanism' },
    [['', 'None'], ['plain', 'PLAIN'], ['scram-sha-256', 'SCRAM-SHA-256'], ['scram-sha-512', 'SCRAM-SHA-512']]
      .map(([v, label]) => h('option', { value: v, selected: v === ((sasl && sasl.mechanism) || '') }, label)));
  const user = input('dest-kafka-user', 'destination.sasl.username', { type: 'text', value: (sasl && sasl.username) || '' });
  const password = secretInput('dest-kafka-password', 'destination.sasl.password');
  const saslFields = h('div', { class: 'stack' },
    labelled('dest-kafka-user', 'SASL user name', user),
    secretLabel('dest-kafka-password', 'SASL password (never shown again)', password, Boolean(sasl)));
  const show = () => { saslFields.hidden = mechanism.value === ''; };
  mechanism.addEventListener('change', show);
  show();
  const node = h('div', { class: 'stack' },
    labelled('dest-kafka-brokers', 'Bootstrap brokers (host:port, comma-separated, at most ten)', brokers),
    labelled('dest-kafka-topic', 'Topic', topic),
    h('label', { class: 'check' }, tls, 'Connect with TLS'),
    labelled('dest-kafka-sasl', 'SASL authentication', mechanism),
    saslFields);
  return {
    node,
    shown: () => [brokers.value.trim(), topic.value.trim(), tls.checked, mechanism.value, user.value.trim()].join('\n'),
    typed: () => password.value !== '',
    needsCredential: () => Boolean(sasl) && mechanism.value !== '' && password.value === '',
    credentialField: password,
    read() {
      const list = brokers.value.split(',').map((s) => s.trim()).filter(Boolean);
      if (list.length === 0) throw new FieldError(brokers, 'Enter at least one broker, as host:port.');
      if (!topic.value.trim()) throw new FieldError(topic, 'Enter the topic.');
      const out = { type: 'kafka', brokers: list, topic: topic.value.trim() };
      if (tls.checked) out.tls = true;
      if (mechanism.value) {
        if (!password.value) throw new FieldError(password, 'Enter the SASL password.');
        out.sasl = { mechanism: mechanism.value, username: user.value.trim(), password: password.value };
      }
      return out;
    },
  };
}

// pubSubFields is the form's Google Cloud Pub/Sub part.
function pubSubFields(d) {
  const project = input('dest-pubsub-project', 'destination.project_id', { type: 'text', value: (d && d.project_id) || '', placeholder: 'my-project' });
  const topic = input('dest-pubsub-topic', 'destination.topic_id', { type: 'text', value: (d && d.topic_id) || '', placeholder: 'webhooks' });
  const key = secretInput('dest-pubsub-key', 'destination.credentials_json');
  const endpoint = input('dest-pubsub-endpoint', 'destination.endpoint', { type: 'text', value: (d && d.endpoint) || '', placeholder: 'pubsub.googleapis.com:443' });
  const node = h('div', { class: 'stack' },
    labelled('dest-pubsub-project', 'Project ID', project),
    labelled('dest-pubsub-topic', 'Topic ID', topic),
    secretLabel('dest-pubsub-key', 'Service account key (the JSON file\'s text; never shown again)', key, Boolean(d && d.credentials_json)),
    labelled('dest-pubsub-endpoint', 'Endpoint (optional: host:port of another endpoint or an emulator)', endpoint));
  return {
    node,
    shown: () => [project.value.trim(), topic.value.trim(), endpoint.value.trim()].join('\n'),
    typed: () => key.value !== '',
    needsCredential: () => Boolean(d && d.credentials_json) && key.value === '',
    credentialField: key,
    read() {
      if (!project.value.trim()) throw new FieldError(project, 'Enter the Google Cloud project ID.');
      if (!topic.value.trim()) throw new FieldError(topic, 'Enter the topic ID.');
      const out = { type: 'gcp_pubsub', project_id: project.value.trim(), topic_id: topic.value.trim() };
      if (key.value.trim()) out.credentials_json = key.value.trim();
      if (endpoint.value.trim()) out.endpoint = endpoint.value.trim();
      return out;
    },
  };
}

// sqsFields is the form's Amazon SQS part.
function sqsFields(d) {
  const queue = input('dest-sqs-queue', 'destination.queue_url', { type: 'url', value: (d && d.queue_url) || '', placeholder: 'https://sqs.eu-west-1.amazonaws.com/123456789012/webhooks' });
  const region = input('dest-sqs-region', 'destination.region', { type: 'text', value: (d && d.region) || '', placeholder: 'eu-west-1' });
  const keyID = input('dest-sqs-key-id', 'destination.access_key_id', { type: 'text', value: (d && d.access_key_id) || '' });
  const secret = secretInput('dest-sqs-secret', 'destination.secret_access_key');
  const endpoint = input('dest-sqs-endpoint', 'destination.endpoint', { type: 'url', value: (d && d.endpoint) || '' });
  const node = h('div', { class: 'stack' },
    labelled('dest-sqs-queue', 'Queue URL', queue),
    labelled('dest-sqs-region', 'Region', region),
    labelled('dest-sqs-key-id', 'Access key ID', keyID),
    secretLabel('dest-sqs-secret', 'Secret access key (never shown again)', secret, Boolean(d && d.secret_access_key)),
    labelled('dest-sqs-endpoint', 'Endpoint (optional: an SQS-compatible server\'s URL)', endpoint));
  return {
    node,
    shown: () => [queue.value.trim(), region.value.trim(), keyID.value.trim(), endpoint.value.trim()].join('\n'),
    typed: () => secret.value !== '',
    needsCredential: () => Boolean(d && d.secret_access_key) && secret.value === '',
    credentialField: secret,
    read() {
      const out = { type: 'sqs', queue_url: queue.value.trim(), region: region.value.trim(),
        access_key_id: keyID.value.trim(), secret_access_key: secret.value };
      if (endpoint.value.trim()) out.endpoint = endpoint.value.trim();
      return out;
    },
  };
}

const builders = { rabbitmq: rabbitFields, kafka: kafkaFields, gcp_pubsub: pubSubFields, sqs: sqsFields };

// destinationFieldset is the form's "Deliver to" section for sub (null
// when creating). allowed are the types the server lets a subscription
// use (the session's destinations; null for an engine that does not say,
// which then offers HTTP endpoints alone); urlLabel is the form's URL
// field, shown for an HTTP endpoint only. read(url) answers what goes in
// the create or update body for where deliveries go.
//
// On update the API replaces a destination whole: a destination left as
// it is goes unsent, which keeps it, credentials included; one that
// changes is sent whole, so its credential must be entered again.
export function destinationFieldset(sub, allowed, urlLabel) {
  const current = kindOf(sub);
  const offered = Object.keys(kinds).filter((k) => k === current || (allowed ? allowed.includes(k) : k === 'webhook'));
  // A kind this module does not know (another module's) is offered as it
  // is, so that an edit never turns it into something else.
  if (!kinds[current]) offered.push(current);
  const kind = h('select', { id: 'endpoint-kind', name: 'destination_type', 'data-param': 'destination' },
    offered.map((k) => h('option', { value: k, selected: k === current }, kinds[k] ? kinds[k].label : `Keep as it is (${k})`)));
  const parts = {};
  for (const k of offered) {
    if (builders[k]) parts[k] = builders[k](k === current && sub ? sub.destination : null);
  }
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
    labelled('endpoint-kind', 'Where deliveries go', kind),
    offered.length === 1 && h('p', { class: 'muted' }, 'This server delivers to HTTP endpoints only.'),
    boxes);

  const read = (url) => {
    if (kind.value === 'webhook') {
      if (!url) throw new FieldError(urlLabel.querySelector('input'), 'Enter the URL that receives the webhooks.');
      // Back from a broker: the destination goes with the URL.
      return current === 'webhook' ? { url } : { url, destination: null };
    }
    const part = parts[kind.value];
    if (!part) return {}; // a kind of another module's, kept as it is
    if (sub && kind.value === current && part.shown() === shownAtStart && !part.typed()) {
      return {}; // left as it is: kept whole, credentials included
    }
    if (sub && kind.value === current && part.needsCredential()) {
      throw new FieldError(part.credentialField,
        'A changed destination replaces the whole one: enter its credential again (it is never shown, so it cannot be kept).');
    }
    return { destination: part.read() };
  };
  return { node, read, kind: () => kind.value };
}
