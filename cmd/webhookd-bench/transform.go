package main

import (
	"context"
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
