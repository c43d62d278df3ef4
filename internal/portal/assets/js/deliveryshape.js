// The shape of a subscription's deliveries on the endpoint pages: the
// payload style (full, or thin: the event's ids without its payload) and
// the batch (several deliveries per request). The form's part
// (shapeFieldset) and the detail's facts (shapeFacts); app.js places them.

import { h } from './dom.js';
import { FieldError } from './destinations.js';

// The API's bounds of a batch (docs/delivery-controls.md).
const maxBatchSize = 100;
const maxBatchWaitMS = 10000;

// shapeFacts are the detail's [label, value] pairs for sub's payload
// style and batch.
export function shapeFacts(sub) {
  const thin = sub.payload_style === 'thin';
  const b = sub.batch;
  return [
    ['Payload', thin
      ? [h('span', { class: 'badge' }, 'thin'), ' The event\'s id, type and the id of the object it is about, without its payload: your endpoint reads the object from the API']
      : 'Full: the event with its payload'],
    ['Batching', b
      ? `Up to ${b.max_size} ${b.max_size === 1 ? 'event' : 'events'} per request, waiting at most ${b.max_wait_ms} ms for them`
      : 'Off: one event per request'],
  ];
}

// numberInput is a whole-number field; param names the API field, so
// that the API's refusal shows beside it.
function numberInput(id, param, min, max, value) {
  return h('input', { id, 'data-param': param, type: 'number', min: String(min), max: String(max), step: '1',
    inputmode: 'numeric', value });
}

// shapeFieldset is the form's "Payload and batching" section for sub
// (null when creating). read(kind) answers what goes in the body: only
// what the form changes (an edit leaves the rest as it is), or throws a
// FieldError. kind is the destination type chosen: the API takes a batch
// for HTTP endpoints only.
export function shapeFieldset(sub) {
  const was = {
    style: (sub && sub.payload_style) || 'full',
    batched: Boolean(sub && sub.batch),
    size: sub && sub.batch ? String(sub.batch.max_size) : '10',
    wait: sub && sub.batch ? String(sub.batch.max_wait_ms) : '0',
  };
  const style = h('select', { id: 'endpoint-payload-style', name: 'payload_style', 'data-param': 'payload_style' },
    [['full', 'Full: the event with its payload'], ['thin', 'Thin: ids only; your endpoint reads the object from the API']]
      .map(([v, label]) => h('option', { value: v, selected: v === was.style }, label)));
  const batched = h('select', { id: 'endpoint-batch', name: 'batch', 'data-param': 'batch' },
    [['off', 'Off: one event per request'], ['on', 'On: several events per request']]
      .map(([v, label]) => h('option', { value: v, selected: (v === 'on') === was.batched }, label)));
  const size = numberInput('endpoint-batch-size', 'batch.max_size', 1, maxBatchSize, was.size);
  const wait = numberInput('endpoint-batch-wait', 'batch.max_wait_ms', 0, maxBatchWaitMS, was.wait);
  const limits = h('div', { class: 'stack' },
    h('label', { for: 'endpoint-batch-size' }, `Most events per request (1–${maxBatchSize})`, size),
    h('label', { for: 'endpoint-batch-wait' }, `Longest wait for a request to fill, in ms (0–${maxBatchWaitMS})`, wait));
  const show = () => { limits.hidden = batched.value !== 'on'; };
  batched.addEventListener('change', show);
  show();
  const node = h('fieldset', { class: 'controls', 'aria-label': 'Payload and batching' }, h('legend', null, 'Payload and batching'),
    h('label', { for: 'endpoint-payload-style' }, 'Payload style', style),
    h('label', { for: 'endpoint-batch' }, 'Batching (HTTP endpoints only)', batched),
    limits);

  const read = (kind) => {
    const body = {};
    if (!sub ? style.value !== 'full' : style.value !== was.style) body.payload_style = style.value;
    const on = batched.value === 'on';
    if (on) {
      for (const el of [size, wait]) {
        if (el.validity.badInput || !/^\d+$/.test(el.value.trim())) {
          throw new FieldError(el, 'Enter a whole number.');
        }
      }
    }
    const changed = on !== was.batched || (on && (size.value.trim() !== was.size || wait.value.trim() !== was.wait));
    if (changed) body.batch = on ? { max_size: Number(size.value), max_wait_ms: Number(wait.value) } : null;
    // The API refuses a batch beside a broker destination when one is
    // made; an edit it would take and keep unused, so the form says it
    // in the API's words.
    if (sub && on && changed && kind !== 'webhook') {
      throw new FieldError(batched, 'batch is for HTTP endpoints; a broker destination receives one message per delivery.');
    }
    return body;
  };
  return { node, read };
}
