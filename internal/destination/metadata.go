package destination

// Metadata describes a kind for the API and the portal: its fields, their
// labels, which hold credentials. A new kind's form is drawn from it.
type Metadata struct {
	// Type is the destination's "type" ("rabbitmq").
	Type string `json:"type"`
	// Label names the kind for a person ("RabbitMQ"); Short is its badge.
	Label string `json:"label"`
	Short string `json:"short"`
	// Delivers says what one delivery becomes ("one persistent message
	// per delivery, confirmed by the broker").
	Delivers string `json:"delivers"`
	// Fields are the kind's fields besides type, in the form's order.
	Fields []Field `json:"fields"`
	// Ordered: the kind keeps the order of an ordering key's deliveries.
	Ordered bool `json:"ordered"`
	// Builtin: a kind of the engine's own (the HTTP endpoint, the
	// listener, poll), added to the registry by the worker
	// (Registry.WithBuiltin). No merchant writes its type as a
	// destination's: Types, Kind, Metadata and Parse leave it out.
	Builtin bool `json:"-"`
	// ChosenBy, for a built-in kind, is the subscription kind
	// (Subject.Kind) that chooses it when no destination is stored;
	// "" for a kind chosen by its stored type alone.
	ChosenBy string `json:"-"`
	// Batches: the kind sends a batch of deliveries as one message (the
	// HTTP endpoint's {"data": […]}); the others take one message per
	// delivery.
	Batches bool `json:"-"`
}

// FieldType is how a field's value is written.
type FieldType string

// The field types.
const (
	// FieldString is a string.
	FieldString FieldType = "string"
	// FieldBool is true or false.
	FieldBool FieldType = "boolean"
	// FieldStrings is a list of strings.
	FieldStrings FieldType = "strings"
	// FieldObject is an object of the Field's own Fields.
	FieldObject FieldType = "object"
	// FieldText is a long string (a key's JSON or PEM).
	FieldText FieldType = "text"
)

// Field is one field of a kind.
type Field struct {
	// Name is the field's JSON name ("routing_key").
	Name string `json:"name"`
	// Label names it for a person ("Routing key").
	Label string `json:"label"`
	// Type is how its value is written.
	Type FieldType `json:"type"`
	// Required: a destination without it is refused.
	Required bool `json:"required,omitempty"`
	// Secret: a credential, or a value holding one (a URL with a
	// password); reads mask it and forms never show it.
	Secret bool `json:"secret,omitempty"`
	// Help says what to put there, for a person.
	Help string `json:"help,omitempty"`
	// Example is a value of the right shape.
	Example string `json:"example,omitempty"`
	// Choices are the values allowed, when they are few.
	Choices []string `json:"choices,omitempty"`
	// Fields are an object's members.
	Fields []Field `json:"fields,omitempty"`
}
