package transform

// TemplateSlack posts each event to a Slack incoming webhook: the payload
// becomes a Slack message (text, and a block with the event's fields).
const TemplateSlack = `// Posts each event to a Slack incoming webhook as a message.
function handler(webhook) {
  const p = webhook.payload || {};
  const amount = p.amount ? ` + "`${p.amount} ${p.currency || ''}`" + `.trim() : '';
  const title = [webhook.event_type, amount, p.status].filter(Boolean).join(' · ');
  webhook.payload = {
    text: title,
    blocks: [
      {type: 'section', text: {type: 'mrkdwn', text: '*' + title + '*'}},
      {type: 'context', elements: [{type: 'mrkdwn', text: 'id ' + (p.id || 'unknown')}]},
    ],
  };
  return webhook;
}
`

// TemplateFlatForm flattens the payload into one level of "a.b.c" keys
// whose values are strings, numbers, booleans or null: the shape a
// spreadsheet tool maps to columns.
const TemplateFlatForm = `// Flattens the payload into one row: {"destination.iban": "DE89…", …}.
function handler(webhook) {
  const row = {event_type: webhook.event_type};
  function flatten(value, prefix) {
    if (value !== null && typeof value === 'object') {
      for (const [key, inner] of Object.entries(value)) {
        flatten(inner, prefix ? prefix + '.' + key : key);
      }
    } else {
      row[prefix] = value;
    }
  }
  flatten(webhook.payload, '');
  webhook.payload = row;
  return webhook;
}
`

// Template is a transformation the portal offers as a start.
type Template struct {
	// Name is the template's stable identifier.
	Name string `json:"name"`
	// Title is what the portal shows.
	Title string `json:"title"`
	// Code is the transformation.
	Code string `json:"code"`
}

// Templates are the templates the portal offers, in its order.
func Templates() []Template {
	return []Template{
		{Name: "slack", Title: "Slack incoming webhook", Code: TemplateSlack},
		{Name: "flat_form", Title: "Flat form (a spreadsheet row)", Code: TemplateFlatForm},
	}
}
