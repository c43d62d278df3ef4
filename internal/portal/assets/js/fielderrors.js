// Puts a refusal next to the field it is about: the API names the field
// of a 400 in its error's param (batch.max_size, destination.routing_key),
// and each control of the forms that know it carries that name in
// data-param. The message also stays in the page's flash, with its code
// and reference.

import { h } from './dom.js';

// clearFieldErrors removes what showFieldError put in form.
export function clearFieldErrors(form) {
  for (const el of form.querySelectorAll('.field-error')) el.remove();
  for (const el of form.querySelectorAll('[aria-invalid="true"]')) {
    el.removeAttribute('aria-invalid');
    el.removeAttribute('aria-describedby');
  }
}

// fieldFor is the visible control of form whose data-param names param
// or the closest field containing it (destination for destination.type,
// batch for batch.max_size when no control names that); null when none
// does.
function fieldFor(form, param) {
  let best = null;
  let bestLength = -1;
  for (const el of form.querySelectorAll('[data-param]')) {
    const p = el.dataset.param;
    const covers = param === p || param.startsWith(p + '.') || param.startsWith(p + '[');
    if (!covers || p.length <= bestLength || el.closest('[hidden]')) continue;
    best = el;
    bestLength = p.length;
  }
  return best;
}

// showFieldError shows err's message after the field it names: err is an
// ApiError with a param, or an Error with the field itself (field). It
// answers whether it found the field.
export function showFieldError(form, err) {
  clearFieldErrors(form);
  const field = err && (err.field || (err.param && fieldFor(form, err.param)));
  if (!field) return false;
  const id = `${field.id || 'field'}-error`;
  const note = h('p', { class: 'field-error', id, role: 'alert' }, err.message);
  field.setAttribute('aria-invalid', 'true');
  field.setAttribute('aria-describedby', id);
  (field.closest('label') || field).after(note);
  field.focus({ preventScroll: false });
  return true;
}
