package main

import (
	"context"
	"io"
	"os"
	"reflect"

	"github.com/webhookd/webhookd/internal/keyscli"
)

// keysAPI runs `webhookd keys list|revoke|roll`, which talk to a running
// engine's internal API and so need none of the engine's configuration:
// only where its internal listener is and its ingest token.
func keysAPI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	listen := os.Getenv("WEBHOOKD_INTERNAL_LISTEN")
	if listen == "" {
		// The engine's own default, from the one place it is written.
		field, _ := reflect.TypeFor[config]().FieldByName("InternalListen")
		listen = field.Tag.Get("envDefault")
	}
	return keyscli.Run(ctx, args, keyscli.Env{InternalListen: listen, IngestToken: os.Getenv("WEBHOOKD_INGEST_TOKEN")}, stdout, stderr)
}
