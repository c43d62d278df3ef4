// Package enginetest holds the tests that run package receiver against
// webhookd's real delivery pipeline. It lives apart so that receiver itself
// never depends on the engine; it has no code of its own.
package enginetest
