// Poll subscriptions (docs/poll.md): webhookd never sends their
// deliveries; the merchant's server reads them. What the portal shows of
// one is its type, how many deliveries wait to be read and acknowledged
// (its backlog), and when it was last read: a backlog that grows while the
// last read gets old is a reader that stopped.

import { h, time } from './dom.js';

// isPoll tells whether sub is a poll subscription.
export function isPoll(sub) {
  return Boolean(sub && sub.destination && sub.destination.type === 'poll');
}

// pollFacts are the [label, value] pairs of a poll subscription's line;
// none for any other subscription.
export function pollFacts(sub) {
  if (!isPoll(sub)) return [];
  const line = sub.poll || {};
  const backlog = Number.isInteger(line.backlog) ? line.backlog : null;
  return [
    ['Type', h('span', { class: 'badge poll' }, 'poll')],
    ['Backlog', backlog === null ? h('span', { class: 'muted' }, '—')
      : `${backlog} ${backlog === 1 ? 'delivery' : 'deliveries'} not acknowledged`],
    ['Last read', line.last_read_at ? time(line.last_read_at) : h('span', { class: 'muted' }, 'Never read')],
  ];
}
