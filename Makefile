# heureka build and test entry points. `make test` is the one test command:
# it installs what the tests need, then runs every Go test.
GO ?= go

.PHONY: build test deps vet fmt-check fuzz image

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
# Debian's etcd-server for the etcd column of heureka bench (bench/bench_e2e_test.go).
	@if ! command -v etcd >/dev/null && [ "$$(id -u)" = 0 ]; then \
		echo "make deps: installing etcd-server"; \
		apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null; \
	fi
# Debian's docker.io and docker-compose, and a running dockerd, for the
# container tests (e2e/compose; they build the image themselves, as make image).
	@sh scripts/docker-deps.sh || echo "make deps: no Docker engine; container tests will skip (and fail under make test)"

# image builds heureka:latest from a binary built here, pulling nothing
# (scripts/image.sh); `docker build -t heureka:latest .` is the same image
# where a registry is reachable.
image:
	@sh scripts/image.sh

test: deps
	HEUREKA_REQUIRE_TOOLS=1 $(GO) test -count=1 -timeout 20m ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# fuzz runs every fuzz target for FUZZTIME each (CI: a short time; issue 8
# asks for 60s). Minimization is capped so a large new input cannot eat the
# whole budget on a small machine.
FUZZTIME ?= 10s
FUZZ_TARGETS = ./fsm:FuzzDecodeCommand ./fsm:FuzzReadSnapshot ./store:FuzzReadJournal \
	./cluster:FuzzDecodeRenewBatch ./httpapi/eureka:FuzzDecodeInstanceJSON ./httpapi/eureka:FuzzDecodeInstanceXML
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name ($$pkg) for $(FUZZTIME)"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s; done
