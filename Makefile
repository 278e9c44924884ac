# heureka build and test entry points. `make test` is the one test command:
# it installs what the tests need, then runs every Go test.
GO ?= go

.PHONY: build test deps vet fmt-check

build:
	$(GO) build -o bin/heureka ./cmd/heureka

# deps installs the external tools the test suite drives (real Eureka
# clients, a real browser); each is added here by the issue that needs it.
deps:
	npm ci --prefix e2e/jsclient --no-audit --no-fund --loglevel=error
# Debian's chromium for the dashboard test (e2e/dashboard_test.go): only as root, only when missing.
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ]; then \
		echo "make deps: installing chromium"; \
		apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi

test: deps
	HEUREKA_REQUIRE_TOOLS=1 $(GO) test -count=1 -timeout 20m ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
