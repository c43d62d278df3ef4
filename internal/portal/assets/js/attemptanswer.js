// What an attempt got back, in the delivery and attempt views: for an
// HTTP endpoint the status and the receiver's answer; for a broker the
// broker's answer (confirmed, refused, unreachable, not confirmed, auth
// failed) and its message, which the attempt record keeps in place of
// them (no HTTP status; the answer or the error in the response body);
// and, for an attempt made in a batch, the batch's id (copyable) and how
// many deliveries the batch carried when the record says.

import { h } from './dom.js';

// brokerAnswers maps a broker attempt's error code to the answer shown.
const brokerAnswers = {
  broker_refused: 'refused',
  broker_unreachable: 'unreachable',
  not_confirmed: 'not confirmed',
  auth_failed: 'auth failed',
};

// confirmed is how a broker attempt's record starts when the broker took
// the message.
const confirmed = /^confirmed by broker/;

// isBrokerAttempt tells an attempt made to a broker: it has no HTTP
// status, and either a broker's error code or the broker's confirmation.
export function isBrokerAttempt(a) {
  if (a.http_status !== null && a.http_status !== undefined) return false;
  return Object.hasOwn(brokerAnswers, a.error || '') || (a.status === 'succeeded' && confirmed.test(a.response_body || ''));
}

// brokerAnswer is the word for a broker attempt's answer.
function brokerAnswer(a) {
  if (!a.error) return 'confirmed';
  return brokerAnswers[a.error] || a.error;
}

// brokerMessage is the broker's message without the code the record
// starts an error with ("broker_refused: …").
function brokerMessage(a) {
  const body = a.response_body || '';
  return a.error && body.startsWith(a.error + ': ') ? body.slice(a.error.length + 2) : body;
}

// answerColumns are the headings of the two columns an attempt's answer
// takes: the HTTP ones, the broker's, or both when a delivery has both
// kinds of attempts (its endpoint changed kind).
export function answerColumns(attempts) {
  const broker = attempts.filter(isBrokerAttempt).length;
  if (broker === 0) return ['HTTP status', 'Answer (first 1 KiB)'];
  if (broker === attempts.length) return ['Broker answer', 'Broker message'];
  return ['HTTP status or broker answer', 'Answer or broker message'];
}

// answerCells are attempt a's two cells under answerColumns.
export function answerCells(a, columns) {
  if (isBrokerAttempt(a)) {
    const word = brokerAnswer(a);
    const message = brokerMessage(a);
    return [
      h('td', { 'data-label': columns[0] }, h('span', { class: `badge broker-${word.replace(' ', '-')}`, 'data-broker-answer': word }, word)),
      h('td', { 'data-label': columns[1], class: 'break' }, message ? h('pre', null, message) : h('span', { class: 'muted' }, 'none')),
    ];
  }
  return [
    h('td', { 'data-label': columns[0] }, a.http_status === null ? '—' : String(a.http_status)),
    h('td', { 'data-label': columns[1], class: 'break' }, a.response_body ? h('pre', null, a.response_body) : h('span', { class: 'muted' }, 'empty')),
  ];
}

// batchSize is how many deliveries a batched attempt's request carried,
// from the webhook-batch-size header it recorded; null when unknown.
function batchSize(a) {
  for (const [name, value] of Object.entries(a.request_headers || {})) {
    if (name.toLowerCase() === 'webhook-batch-size' && /^\d+$/.test(value)) return Number(value);
  }
  return null;
}

// copyText puts text on the clipboard; where the page may not (an
// insecure origin, a refused permission) it selects node's text for the
// person to copy.
async function copyText(text, node) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const range = document.createRange();
    range.selectNodeContents(node);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    return false;
  }
}

// batchCell is the attempt's batch: its id with a Copy button and its
// size, or a dash when the attempt went alone.
export function batchCell(a) {
  if (!a.batch_id) return h('td', { 'data-label': 'Batch' }, h('span', { class: 'muted' }, '—'));
  const id = h('code', { class: 'batch-id' }, a.batch_id);
  const copy = h('button', { type: 'button', class: 'secondary small', 'aria-label': `Copy batch id ${a.batch_id}` }, 'Copy');
  const said = h('span', { class: 'muted', role: 'status' });
  copy.addEventListener('click', async () => {
    said.textContent = (await copyText(a.batch_id, id)) ? 'Copied.' : 'Selected: copy it with your keyboard.';
  });
  const size = batchSize(a);
  return h('td', { 'data-label': 'Batch', class: 'break' },
    h('div', { class: 'row' }, id, copy, said),
    size !== null && h('span', { class: 'muted' }, `${size} ${size === 1 ? 'delivery' : 'deliveries'} in this batch`));
}

// hasBatch tells whether any attempt went in a batch: the Batch column
// shows only then.
export function hasBatch(attempts) {
  return attempts.some((a) => a.batch_id);
}
