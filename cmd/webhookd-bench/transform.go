package main

import (
	"context"
	"fmt"
)

// benchTransformation is the transform scenario's handler: ten lines
// reshaping a payout into a Slack-like message, the kind of code a
// merchant writes (docs/transformations.md).
const benchTransformation = `function handler(webhook) {
  const p = webhook.payload || {};
  const title = [webhook.event_type, p.amount, p.currency, p.status].filter(Boolean).join(' ');
  webhook.payload = {
    text: title,
    blocks: [{type: 'section', text: {type: 'mrkdwn', text: '*' + title + '*'}}],
    id: p.id || null,
  };
  webhook.headers['x-bench'] = 'transformed';
  return webhook;
}`

// transformScenario is single's workload to subscriptions with a
// transformation (issue 40): each delivery runs the merchant's ten-line
// handler in the sandbox before it is signed. Read against single's
// figures: the CPU per delivery it adds is the sandbox's. The receivers
// verify each signature over the transformed body as usual.
func transformScenario(ctx context.Context, l *lab) (*report, error) {
	r, _, _, err := singleShaped(ctx, l, "transform", " with a ten-line transformation on every subscription", endpointShape{
		fields: func(_ int, url string) map[string]any {
			return map[string]any{"url": url, "transformation": map[string]any{"code": benchTransformation}}
		},
	}, nil)
	return r, err
}

// spinningSubscriptions is how many subscriptions of the spinning
// scenario's merchant A run a script that spins at its limit.
const spinningSubscriptions = 5

// spinningScenario (issue 40) is hostile's isolation shape with a
// transformation in place of hanging endpoints: merchant A's
// subscriptions each run a handler that never returns, stopped at its CPU
// limit on every attempt (transformation_error, retried), while merchant
// B publishes steadily to one fast subscription; B's latency alone and
// beside A's load are reported and judged as hostile's are.
func spinningScenario(ctx context.Context, l *lab) (*report, error) {
	loadRate := orDefault(l.cfg.loadRate, hostileRate)
	rate := orDefault(l.cfg.rate, probeRate)
	spinner, calm := l.cfg.merchant+"-spinning-a", l.cfg.merchant+"-spinning-b"
	r := &report{scenario: "spinning", params: fmt.Sprintf("merchant A: %d subscriptions whose transformation spins until its CPU limit, %g events/s each to all of them; merchant B: 1 fast subscription, %g events/s; phases of %s, A's load %s ahead of B's beside phase",
		spinningSubscriptions, loadRate, rate, l.cfg.phase, l.cfg.warmup)}
	owners := append(repeat(spinner, spinningSubscriptions), calm)
	f, err := l.fleets.setUpWith(ctx, owners, len(owners), 0, "", int(rate*l.cfg.phase.Seconds())*2, l.fleets.listeners, endpointShape{
		fields: func(i int, url string) map[string]any {
			if i >= spinningSubscriptions {
				return map[string]any{"url": url}
			}
			return map[string]any{"url": url, "transformation": map[string]any{"code": "function handler(webhook) { for (;;) {} }"}}
		},
	})
	if err != nil {
		return r, err
	}
	defer l.fleets.tearDown(f)
	load := soloThenBeside(ctx, l, f, r, "spinning-load", spinner, calm, loadRate, rate)
	r.add("spinning_events_published", load.published, "events")
	return r, ctx.Err()
}
