package receiver

import "strings"

// VerifyMessage is [Verifier.Verify] for a message taken from a broker
// (RabbitMQ, Kafka, SQS, Pub/Sub): webhookd sends the same body and the
// same Standard Webhooks headers, as the message's headers or attributes,
// whose names attrs holds as the consumer read them (lowercase as sent,
// any case accepted). Values of a type other than string (a broker's own
// headers) are not looked at; convert them first.
func (v *Verifier) VerifyMessage(attrs map[string]string, body []byte) error {
	return v.VerifyValues(attribute(attrs, HeaderID), attribute(attrs, HeaderTimestamp), attribute(attrs, HeaderSignature), body)
}

// attribute reads name from attrs in any case.
func attribute(attrs map[string]string, name string) string {
	if v, ok := attrs[strings.ToLower(name)]; ok {
		return v
	}
	for k, v := range attrs {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}
