// Package migrations holds webhookd's SQL schema as goose migrations,
// embedded so that the binary carries its own schema.
package migrations

import "embed"

// FS holds the numbered goose migration files.
//
//go:embed *.sql
var FS embed.FS
