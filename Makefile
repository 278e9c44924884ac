# heureka build and test entry points. `make test` is the one test command:
# it installs what the tests need, then runs every Go test.
GO ?= go

.PHONY: build build-bench test unit e2e deps vet fmt-check fuzz race

build:
	$(GO) build -o bin/heureka ./cmd/heureka

# build-bench builds heureka with the etcd column of heureka bench (docs/bench.md, "The etcd column").
build-bench:
	$(GO) build -tags etcdclient -o bin/heureka ./cmd/heureka

# deps installs the external tools the test suite drives (real Eureka
# clients, a real browser); each is added here by the change that needs it.
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

test: deps
	HEUREKA_REQUIRE_TOOLS=1 $(GO) test -count=1 -timeout 20m ./...

# unit is the quick loop: every test that starts no heureka process (-short skips the rest).
unit:
	$(GO) test -short -count=1 ./...

# e2e runs the system tests, which start real heureka (and etcd, node, chromium) processes.
e2e: deps
	HEUREKA_REQUIRE_TOOLS=1 $(GO) test -count=1 -timeout 20m ./e2e ./bench ./cmd/heureka

# race runs the tests of the packages that hold concurrency under the race
# detector (-short: the in-process tests, not the multi-process system tests).
RACE_PKGS = ./cache ./fsm ./store ./httpapi/... ./cluster ./faultproxy ./lab
race:
	$(GO) test -race -short -count=1 $(RACE_PKGS)

vet:
	$(GO) vet ./...
	$(GO) vet -tags etcdclient ./bench

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# fuzz runs every fuzz target for FUZZTIME each (CI: a short time; a
# thorough run uses 60s). Minimization is capped so a large new input cannot eat the
# whole budget on a small machine.
FUZZTIME ?= 10s
FUZZ_TARGETS = ./fsm:FuzzDecodeCommand ./fsm:FuzzReadSnapshot ./store:FuzzReadJournal \
	./cluster:FuzzDecodeRenewBatch ./httpapi/eureka:FuzzDecodeInstanceJSON ./httpapi/eureka:FuzzDecodeInstanceXML
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name ($$pkg) for $(FUZZTIME)"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s; done
