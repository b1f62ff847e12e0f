# dsdelta — build and test entry points. `make test` is the one command CI runs.
GO ?= go
FUZZTIME ?= 5s

.PHONY: all build test vet unit fuzz terraform-check bench example clean

all: build

build:
	$(GO) build -o bin/dsdelta ./cmd/dsdelta

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

unit:
	$(GO) test -count=1 -timeout 12m ./...

# Brief coverage-guided fuzzing of every decoder of outside input.
fuzz:
	@./scripts/fuzz.sh $(FUZZTIME)

terraform-check:
	@bash .ci/terraform.sh

test: vet unit fuzz terraform-check

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./shared/...

clean:
	rm -rf bin
