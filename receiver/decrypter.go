package receiver

// Decrypter turns the verified body of a delivery to a subscription with
// encryption into the event envelope it carries. Package receiver/jwe has
// the one for webhookd's JWE bodies; receiver itself stays on the standard
// library.
type Decrypter interface {
	// Decrypt returns the plaintext of body, or an error when body cannot
	// be decrypted.
	Decrypt(body []byte) ([]byte, error)
}
