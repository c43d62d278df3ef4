# webhookd: the commands a developer needs. Each target is a command or two
# that also works pasted into a shell; see docs/development.md.

export PATH := /usr/local/go/bin:$(PATH)
GO ?= go

.PHONY: build run test test-fast lint bench

build:
	@echo "Compiling webhookd into ./webhookd (the first build takes a few minutes)."
	$(GO) build -v -o webhookd ./cmd/webhookd

# A development engine: local Postgres and Redis, a fixed ingest token,
# deliveries to http:// and private addresses allowed.
run:
	bash .ci/services.sh
	@$(MAKE) --no-print-directory build
	WEBHOOKD_INGEST_TOKEN=$${WEBHOOKD_INGEST_TOKEN:-dev-ingest-token} \
	WEBHOOKD_ALLOW_HTTP_TARGETS=true WEBHOOKD_ALLOW_PRIVATE_TARGETS=true \
	./webhookd serve

# The full lane, as CI runs it: every test with the race detector.
test:
	bash .ci/services.sh
	bash scripts/test

# The fast lane: the same without the tests that build and run the real
# binary, the browser, Redis HA, PgBouncer and fault tests (-short).
test-fast:
	bash .ci/services.sh
	bash scripts/test -short

# The same checks as .ci/run: gofmt, then go vet.
lint:
	@echo "== gofmt"
	@files=$$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*'); \
	unformatted=$$(gofmt -l $$files); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	@echo "== go vet"
	$(GO) vet ./...

# The micro-benchmarks of the hot pure functions (BENCHMARKS.md).
bench:
	$(GO) test -run XXX -bench . -benchmem ./signer ./retry ./dispatcher ./admin
