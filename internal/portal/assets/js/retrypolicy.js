// A subscription's own retry policy on the endpoint pages: the delays
// between attempts and the timeout of one attempt (docs/delivery-controls.md,
// "Retry policy"). The form's part (retryFieldset) and the detail's facts
// (retryFacts); app.js places them. The API checks every value and names
// the field it refuses (retry_policy.schedule[3]), which the form shows
// beside the field (fielderrors.js).

import { h } from './dom.js';
import { FieldError } from './destinations.js';

// The API's bound of an attempt's timeout, in seconds.
const maxTimeout = 25;

// retryFacts are the detail's [label, value] pairs for sub's retry policy.
export function retryFacts(sub) {
  const p = sub.retry_policy;
  const schedule = p && Array.isArray(p.schedule) ? p.schedule : null;
  return [
    ['Retry schedule', schedule === null
      ? 'The engine\'s: up to 15 attempts over about 54 hours'
      : schedule.length === 0 ? 'One attempt, no retries'
        : `${schedule.length + 1} attempts, then waiting ${schedule.join(', ')} (each ±10 %)`],
    ['Attempt timeout', p && Number.isInteger(p.timeout_seconds) ? `${p.timeout_seconds} s` : 'The engine\'s'],
  ];
}

// retryFieldset is the form's "Retries" section for sub (null when
// creating). read() answers what goes in the body: retry_policy only when
// the form changes it (an edit leaves it as it is), null for the engine's;
// or throws a FieldError.
export function retryFieldset(sub) {
  const p = sub && sub.retry_policy;
  const was = {
    schedule: p && Array.isArray(p.schedule) ? p.schedule.join(', ') : '',
    timeout: p && Number.isInteger(p.timeout_seconds) ? String(p.timeout_seconds) : '',
  };
  const schedule = h('input', { id: 'endpoint-retry-schedule', name: 'retry_schedule', type: 'text', 'data-param': 'retry_policy.schedule',
    value: was.schedule, placeholder: '5s, 1m, 10m, 1h', autocomplete: 'off', spellcheck: 'false' });
  const timeout = h('input', { id: 'endpoint-retry-timeout', name: 'retry_timeout', type: 'number', min: '1', max: String(maxTimeout), step: '1',
    inputmode: 'numeric', 'data-param': 'retry_policy.timeout_seconds', value: was.timeout });
  const node = h('fieldset', { class: 'controls', 'aria-label': 'Retries' }, h('legend', null, 'Retries'),
    h('label', { for: 'endpoint-retry-schedule' },
      'Retry schedule (optional): the waits between attempts, comma-separated, such as 30s, 5m, 1h30m, 1d; at most 14, at least 1s each, 30d in all; empty is the engine\'s schedule',
      schedule),
    h('label', { for: 'endpoint-retry-timeout' }, `Attempt timeout (optional): seconds, 1–${maxTimeout}; empty is the engine's`, timeout));

  const read = () => {
    const now = { schedule: schedule.value.trim(), timeout: timeout.value.trim() };
    if (timeout.validity.badInput || (now.timeout !== '' && !/^\d+$/.test(now.timeout))) {
      throw new FieldError(timeout, 'Enter the timeout as a whole number of seconds, or leave it empty.');
    }
    if (now.schedule === was.schedule && now.timeout === was.timeout) return {};
    if (now.schedule === '' && now.timeout === '') return sub ? { retry_policy: null } : {};
    return {
      retry_policy: {
        schedule: now.schedule === '' ? null : now.schedule.split(',').map((s) => s.trim()),
        timeout_seconds: now.timeout === '' ? null : Number(now.timeout),
      },
    };
  };
  return { node, read };
}
