# dsdelta — build and test entry points. `make test` is the one command CI runs.
GO ?= go
FUZZTIME ?= 5s

.PHONY: all build test vet lint unit fuzz terraform-check bench example clean

all: build

build:
	$(GO) build -o bin/dsdelta ./cmd/dsdelta

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

# staticcheck, at the version the tool directive in go.mod pins (go tool
# fetches and builds it through the module proxy); any finding fails. bench/
# is a module of its own whose DuckDB driver needs cgo: the same binary
# checks it where cgo is available.
lint:
	$(GO) tool staticcheck ./...
	@if [ "$$($(GO) env CGO_ENABLED)" = 1 ]; then \
	  sc=$$($(GO) tool -n staticcheck) && echo "cd bench && staticcheck ./..." && cd bench && "$$sc" ./...; \
	else \
	  echo "lint: bench/ not checked: its DuckDB driver needs cgo (CGO_ENABLED=0)"; \
	fi

unit:
	$(GO) test -count=1 -timeout 12m ./...

# Brief coverage-guided fuzzing of every decoder of outside input.
fuzz:
	@./scripts/fuzz.sh $(FUZZTIME)

terraform-check:
	@bash .ci/terraform.sh

test: vet lint unit fuzz terraform-check

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./shared/...

clean:
	rm -rf bin
