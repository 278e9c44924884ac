# heureka build and test entry points. `make test` is the one test command:
# it installs what the tests need, then runs every Go test.
GO ?= go

.PHONY: build build-bench bench-summary bench-scale etcd-server test unit e2e deps vet lint fmt-check fuzz race image mutation-check

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
	@$(MAKE) --no-print-directory etcd-server
# Debian's docker.io and docker-compose, and a running dockerd, for the
# container tests (e2e/compose; they build the image themselves, as make image).
	@sh scripts/docker-deps.sh || echo "make deps: no Docker engine; container tests will skip (and fail under make test)"
# Spring Cloud's Eureka client and eureka-server apps (e2e/springclient,
# e2e/eurekaserver), spring-boot-starter-heureka (clients/, installed into
# Maven's local repository) and the app that uses it (e2e/springcaller),
# built by Maven: fetched once into Maven's local repository, then offline.
# Rebuilt only when their sources change.
	@$(MAKE) --no-print-directory java-apps
# py-eureka-client, pinned in e2e/pyclient/requirements.txt, in a venv.
	@if ! command -v python3 >/dev/null; then \
		if [ "$$HEUREKA_REQUIRE_TOOLS" = 1 ]; then echo "make deps: python3 is required"; exit 1; fi; \
		echo "make deps: python3 missing, skipping py-eureka-client"; \
	elif ! cmp -s e2e/pyclient/requirements.txt e2e/pyclient/.venv/installed.txt; then \
		echo "make deps: installing py-eureka-client"; \
		python3 -m venv e2e/pyclient/.venv && \
		e2e/pyclient/.venv/bin/pip install -q --disable-pip-version-check -r e2e/pyclient/requirements.txt && \
		cp e2e/pyclient/requirements.txt e2e/pyclient/.venv/installed.txt; \
	fi

# etcd-server installs Debian's etcd-server: only as root, only when missing.
etcd-server:
	@if ! command -v etcd >/dev/null && [ "$$(id -u)" = 0 ]; then \
		echo "make deps: installing etcd-server"; \
		apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null; \
	fi

# bench-summary regenerates the summary table at the top of BENCHMARKS.md
# (heureka beside eureka-server, etcd and the limit at 10,000, 50,000 and
# 200,000 instances; docs/bench.md, "The summary table"): it builds heureka
# with the etcd column, installs etcd and builds the eureka-server jar where
# it can, then runs heureka bench --summary, which rewrites only the lines
# between the table's markers. A column that cannot run says so in the
# table. About an hour on a 2-core machine. BENCH_ARGS adds flags (e.g.
# BENCH_ARGS=--summary-sizes=10000 for a quick look).
bench-summary: build-bench etcd-server
	@$(MAKE) --no-print-directory java-tools
	@if command -v mvn >/dev/null && command -v java >/dev/null; then \
		$(MAKE) -s --no-print-directory e2e/eurekaserver/target/eurekaserver.jar; fi
	bin/heureka bench --summary BENCHMARKS.md $(BENCH_ARGS)

# bench-scale regenerates the scale table of BENCHMARKS.md: heureka and the
# limit at 10,000, 100,000 and 1,000,000 instances, 20 to an application
# (docs/bench.md, "The scale table"), with 5 minutes of sustained renewals
# at the largest size. About 25 minutes and 10 GB of memory on a 2-core
# machine. BENCH_ARGS adds flags.
bench-scale: build
	bin/heureka bench --scale BENCHMARKS.md $(BENCH_ARGS)

# image builds heureka:latest from a binary built here, pulling nothing
# (scripts/image.sh); `docker build -t heureka:latest .` is the same image
# where a registry is reachable.
image:
	@sh scripts/image.sh

STARTER = clients/spring-boot-starter-heureka
STARTER_JAR = $(STARTER)/target/spring-boot-starter-heureka-0.1.0.jar
JAVA_APPS = e2e/springclient/target/springclient.jar e2e/eurekaserver/target/eurekaserver.jar \
	$(STARTER_JAR) e2e/springcaller/target/springcaller.jar
# Maven's output is shown only when a build fails.
MVN = mvn -q -B -DskipTests

.PHONY: java-apps java-tools
java-apps: java-tools
	@if command -v mvn >/dev/null && command -v java >/dev/null; then \
		$(MAKE) -s --no-print-directory $(JAVA_APPS); \
	elif [ "$$HEUREKA_REQUIRE_TOOLS" = 1 ]; then echo "make deps: java and mvn are required"; exit 1; \
	else echo "make deps: java or mvn missing, skipping the Spring apps"; fi

# java-tools installs Maven and a JDK: only as root, only when missing.
java-tools:
	@if [ "$$(id -u)" = 0 ] && ! command -v mvn >/dev/null; then \
		echo "make deps: installing maven and a JDK"; \
		apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven openjdk-17-jdk-headless >/dev/null; \
	fi

e2e/springclient/target/springclient.jar: e2e/springclient/pom.xml $(shell find e2e/springclient/src -type f)
	@echo "make deps: building e2e/springclient"
	@log=$$(mktemp); cd e2e/springclient && $(MVN) package >$$log 2>&1 || { cat $$log; rm -f $$log; exit 1; }; rm -f $$log

# The starter is installed into the local repository, where springcaller's
# build finds it; springcaller is built clean, since Maven's jar and repackage
# steps keep a jar whose own classes did not change even when a dependency did.
# Its unit tests run here too, so that what they need is fetched (the test run
# of make test, e2e/starter_unit_test.go, is offline).
$(STARTER_JAR): $(STARTER)/pom.xml $(shell find $(STARTER)/src -type f)
	@echo "make deps: building, testing and installing $(STARTER)"
	@log=$$(mktemp); cd $(STARTER) && mvn -q -B install >$$log 2>&1 || { cat $$log; rm -f $$log; exit 1; }; rm -f $$log

e2e/springcaller/target/springcaller.jar: e2e/springcaller/pom.xml $(shell find e2e/springcaller/src -type f) $(STARTER_JAR)
	@echo "make deps: building e2e/springcaller"
	@log=$$(mktemp); cd e2e/springcaller && $(MVN) clean package >$$log 2>&1 || { cat $$log; rm -f $$log; exit 1; }; rm -f $$log

e2e/eurekaserver/target/eurekaserver.jar: e2e/eurekaserver/pom.xml $(shell find e2e/eurekaserver/src -type f)
	@echo "make deps: building e2e/eurekaserver"
	@log=$$(mktemp); cd e2e/eurekaserver && $(MVN) package >$$log 2>&1 || { cat $$log; rm -f $$log; exit 1; }; rm -f $$log

test: deps
	HEUREKA_REQUIRE_TOOLS=1 $(GO) test -count=1 -timeout 30m ./...
	./scripts/mutation-check.sh

# mutation-check: the fault-schedule test's short run must catch a build
# with the frozen AP overlay put back (scripts/mutation-check.sh).
mutation-check:
	./scripts/mutation-check.sh

# unit is the quick loop: every test that starts no heureka process (-short skips the rest).
unit:
	$(GO) test -short -count=1 ./...

# e2e runs the system tests, which start real heureka (and etcd, node, chromium)
# processes, and the container tests of e2e/compose.
e2e: deps
	HEUREKA_REQUIRE_TOOLS=1 $(GO) test -count=1 -timeout 30m ./e2e/... ./bench ./cmd/heureka

# race runs the tests of the packages that hold concurrency under the race
# detector (-short: the in-process tests, not the multi-process system tests).
RACE_PKGS = ./cache ./fsm ./store ./httpapi/... ./cluster ./nodeapi ./internal/testkit/launch ./faultproxy ./lab ./peering ./region ./internal/runtime/memlimit
race:
	$(GO) test -race -short -count=1 $(RACE_PKGS)

vet:
	$(GO) vet ./...
	$(GO) vet -tags etcdclient ./bench

# lint runs staticcheck, pinned at STATICCHECK_VERSION and installed into
# bin/ (beside make build's binary, ignored by git) when missing or another
# version. The second run covers the files behind build tags: the etcd
# column of heureka bench, the chaos, soak and disk-fault tests.
STATICCHECK_VERSION = v0.8.2
STATICCHECK = bin/staticcheck
LINT_TAGS = etcdclient,chaos,soak,diskfault
LINT_TAGGED_PKGS = ./bench ./cluster ./e2e/... ./store
lint:
	@if ! $(STATICCHECK) -version 2>/dev/null | grep -qF '($(STATICCHECK_VERSION:v%=%))'; then \
		echo "make lint: installing staticcheck $(STATICCHECK_VERSION) into bin/"; \
		GOBIN="$(CURDIR)/bin" $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); \
	fi
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags $(LINT_TAGS) $(LINT_TAGGED_PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# fuzz runs every fuzz target for FUZZTIME each (CI: a short time; a
# thorough run uses 60s). Minimization is capped so a large new input cannot eat the
# whole budget on a small machine.
FUZZTIME ?= 10s
FUZZ_TARGETS = ./fsm:FuzzDecodeCommand ./fsm:FuzzDecodeRegisterBody ./fsm:FuzzDecodeRenewBatchBody ./fsm:FuzzReadSnapshot ./fsm:FuzzMetadataDecode \
	./store:FuzzReadJournal \
	./cluster:FuzzDecodeRenewBatch ./eureka:FuzzDecodeInstanceJSON ./eureka:FuzzDecodeInstanceXML
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name ($$pkg) for $(FUZZTIME)"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s; done
