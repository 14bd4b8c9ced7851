# capflow: `make dev` to try it, `make test` to prove it.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
# The Temporal CLI (dev server + Web UI) pinned to the version that builds
# with `go install` (later ones carry a replace directive it refuses).
TEMPORAL_VERSION ?= v1.5.1
STATICCHECK_VERSION ?= v0.8.2
VERSITYGW_VERSION ?= v1.8.0
WORKFLOWCHECK_VERSION ?= v0.6.0
# make cluster: the Temporal server docker-compose.yml runs (its image tag),
# and the Web UI server (the nearest release published as a Go module).
TEMPORAL_SERVER_VERSION ?= v1.31.0
TEMPORAL_UI_VERSION ?= v2.50.1
TEMPORAL ?= $(shell command -v temporal 2>/dev/null || echo $(BIN)/temporal)
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/capflow/capflow/internal/cli.Version=$(VERSION) -X github.com/capflow/capflow/internal/workerapp.Version=$(VERSION)

.PHONY: all build test test-unit plan-tests lint bench bench-peers bench-throughput restate-peer fuzz dev clean temporal tools record-histories versitygw chromium bubblewrap compose-cli ts-client mcp-servers transfer-tools cluster cluster-test cluster-tools postgresql soak

all: build

build: ## bin/capflow and bin/capflow-worker
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/capflow ./starter
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/capflow-worker ./worker

$(BIN)/temporal:
	@echo "building the Temporal CLI $(TEMPORAL_VERSION) into bin/ (a few minutes, once)"
	GOBIN=$(BIN) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_VERSION)

$(BIN)/versitygw:
	@echo "building versitygw $(VERSITYGW_VERSION) into bin/ (an S3-compatible server for the artifact store's tests; a few minutes, once)"
	GOBIN=$(BIN) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

versitygw: $(BIN)/versitygw ## an S3-compatible server (versitygw) for the artifact store's tests

temporal: ## the dev server binary (used from PATH when already installed)
	@if [ "$(TEMPORAL)" = "$(BIN)/temporal" ]; then $(MAKE) --no-print-directory $(BIN)/temporal; fi

chromium: ## headless Chromium for the runtime kit's browser.run (Debian's package, installed once)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { echo "installing chromium (apt-get)"; $$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get update -qq && \
	    $$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get install -y -qq chromium; }

bubblewrap: ## bubblewrap, which confines command tools and servers (Debian's package, installed once)
	@command -v bwrap >/dev/null 2>&1 || \
	  { echo "installing bubblewrap (apt-get)"; $$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get update -qq && \
	    $$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get install -y -qq bubblewrap; }

compose-cli: ## Debian's docker-compose, to validate docker-compose.yml (no Docker engine needed)
	@command -v docker-compose >/dev/null 2>&1 || \
	  { echo "installing docker-compose (apt-get)"; $$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get update -qq && \
	    $$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get install -y -qq docker-compose; }

TS_CLIENT := examples/ts-client
ts-client: $(TS_CLIENT)/dist/start-plan.js ## the TypeScript client example (npm), run by the e2e tests

$(TS_CLIENT)/dist/start-plan.js: $(TS_CLIENT)/src/start-plan.ts $(TS_CLIENT)/package-lock.json $(TS_CLIENT)/tsconfig.json
	@node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' || \
	  { echo "Node.js >= 20 is needed for @temporalio/client (found $$(node --version))"; exit 1; }
	cd $(TS_CLIENT) && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build

# The server, its SQL tool and the PostgreSQL schema it ships (its .sql and
# manifest files: Go files under bin/ would join this module).
$(BIN)/temporal-server:
	@echo "building the Temporal server $(TEMPORAL_SERVER_VERSION) and its SQL tool into bin/ (several minutes, once)"
	@set -e; tmp=$$(mktemp -d); GOBIN=$$tmp $(GO) install go.temporal.io/server/cmd/server@$(TEMPORAL_SERVER_VERSION) go.temporal.io/server/cmd/tools/sql@$(TEMPORAL_SERVER_VERSION); \
	  src=$$($(GO) env GOMODCACHE)/go.temporal.io/server@$(TEMPORAL_SERVER_VERSION)/schema; rm -rf $(BIN)/temporal-schema; \
	  (cd $$src && find postgresql \( -name '*.sql' -o -name '*.json' \) -exec install -D -m 644 {} $(BIN)/temporal-schema/{} \;); \
	  mv $$tmp/sql $(BIN)/temporal-sql-tool; mv $$tmp/server $@; rm -rf $$tmp

$(BIN)/temporal-ui-server:
	@echo "building the Temporal Web UI server $(TEMPORAL_UI_VERSION) into bin/ (once)"
	@set -e; tmp=$$(mktemp -d); GOBIN=$$tmp $(GO) install github.com/temporalio/ui-server/v2/cmd/server@$(TEMPORAL_UI_VERSION); \
	  install -D -m 644 $$($(GO) env GOMODCACHE)/github.com/temporalio/ui-server/v2@$(TEMPORAL_UI_VERSION)/config/docker.yaml $(BIN)/temporal-ui/config/docker.yaml; \
	  echo 'host: {{ env "TEMPORAL_UI_IP" | default "127.0.0.1" }}' >> $(BIN)/temporal-ui/config/docker.yaml; \
	  mv $$tmp/server $@; rm -rf $$tmp

postgresql: ## PostgreSQL for make cluster (Debian's package, installed once; make cluster runs its own instance)
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || \
	  { echo "installing postgresql (apt-get)"; $$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get update -qq && \
	    $$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get install -y -qq postgresql; }

cluster-tools: build temporal postgresql $(BIN)/temporal-server $(BIN)/temporal-ui-server

cluster-test: cluster-tools ## the durability suite against a private cluster of make cluster's shape, faults included
	@./scripts/cluster-test.sh

# The soak (docs/operations.md#the-soak); make test runs a short one.
SOAK_RUNS ?= 60
soak: cluster-tools versitygw bubblewrap ## capflow under a mix of plans on three hosts and a shared S3 store while workers, the server and PostgreSQL die on a schedule; soak.json
	$(GO) build -o $(BIN)/capflow-soak ./bench/soak
	SOAK_RUNS=$(SOAK_RUNS) ./scripts/soak.sh

cluster: cluster-tools ## the production shape without Docker: PostgreSQL, the Temporal server, its Web UI and a worker; Ctrl-C stops them
	@./scripts/cluster.sh

MCP_SERVERS := testdata/mcp-servers
mcp-servers: $(MCP_SERVERS)/node_modules/.bin/mcp-server-everything ## MCP servers from npm for the e2e tests (docs/mcp.md)

$(MCP_SERVERS)/node_modules/.bin/mcp-server-everything: $(MCP_SERVERS)/package-lock.json
	cd $(MCP_SERVERS) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

transfer-tools: ## yt-dlp and rclone, which the net kit's tools run (Debian's packages, installed once)
	@command -v yt-dlp >/dev/null 2>&1 && command -v rclone >/dev/null 2>&1 || \
	  { echo "installing yt-dlp and rclone (apt-get)"; $$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get update -qq && \
	    $$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get install -y -qq yt-dlp rclone; }

test: build temporal versitygw chromium bubblewrap compose-cli ts-client mcp-servers transfer-tools cluster-tools ## the whole suite: unit (race detector on), workflow, replay, fuzz seeds, a short fuzzing pass, end-to-end tests, cluster-test and a short soak (10 runs, 4 faults)
	$(GO) test -race -count=1 -timeout 20m $$($(GO) list ./... | grep -v /e2e)
	$(MAKE) --no-print-directory fuzz FUZZTIME=10000x
	$(MAKE) --no-print-directory plan-tests
	CAPFLOW_TEMPORAL_BIN=$(TEMPORAL) $(GO) test -count=1 -parallel 6 -timeout 30m ./e2e
	./scripts/cluster-test.sh
	$(GO) build -o $(BIN)/capflow-soak ./bench/soak
	SOAK_OUT=.capflow/soak-short.json ./scripts/soak.sh --runs 10 --faults 4

record-histories: build temporal ## re-record workflows/testdata/histories from real runs
	CAPFLOW_TEMPORAL_BIN=$(TEMPORAL) CAPFLOW_RECORD_HISTORIES=1 $(GO) test -count=1 -parallel 6 -timeout 15m ./e2e

plan-tests: build ## capflow plan test of every example plan, with its cases (plans/examples/tests/) or a generated happy path
	@for p in plans/examples/*.yaml; do $(BIN)/capflow plan test "$$p" --coverage >/dev/null || { $(BIN)/capflow plan test "$$p"; exit 1; }; echo "✓ $$p"; done

test-unit: compose-cli ## everything that needs no Temporal server
	$(GO) test -count=1 -short ./...

$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(BIN)/workflowcheck:
	GOBIN=$(BIN) $(GO) install go.temporal.io/sdk/contrib/tools/workflowcheck@$(WORKFLOWCHECK_VERSION)

lint: $(BIN)/staticcheck $(BIN)/workflowcheck ## gofmt, go vet, staticcheck, workflowcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(BIN)/staticcheck ./...
	$(BIN)/workflowcheck ./workflows/...

bench: build temporal cluster-tools ## speed targets: registry, plan checks, and capflow vs a minimal workflow on one default-config dev server
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./internal/... ./activities
	CAPFLOW_E2E_DEV_SERVER=default CAPFLOW_TEMPORAL_BIN=$(TEMPORAL) $(GO) test -run '^$$' -bench 'Overhead|Local|Store|Console|Limits' -benchtime 6x -timeout 60m ./e2e
	CAPFLOW_E2E_DEV_SERVER=default CAPFLOW_TEMPORAL_BIN=$(TEMPORAL) $(GO) test -run '^$$' -bench Scale -benchtime 1x -timeout 60m ./e2e
	./scripts/cluster-test.sh bench

# The peers side by side (docs/performance.md): capflow, a hand-written
# Temporal workflow and Restate (its server from npm, pinned in
# bench/peers/package-lock.json; its Go service a module of its own) on one
# dev server and machine, in one run; writes bench-peers.json.
bench-peers: build temporal restate-peer ## capflow vs a hand-written Temporal workflow vs Restate: ms per step, bench-peers.json
	CAPFLOW_TEMPORAL_BIN=$(TEMPORAL) $(GO) test -run '^$$' -bench Peers -benchtime 1x -timeout 60m ./e2e

# Many runs at once (docs/performance.md): 300 runs of a 3-step chain on
# each peer, and a confined step's cost; writes bench-throughput.json.
bench-throughput: build temporal restate-peer bubblewrap ## runs/s of capflow vs a hand-written Temporal workflow vs Restate, bench-throughput.json
	CAPFLOW_TEMPORAL_BIN=$(TEMPORAL) $(GO) test -run '^$$' -bench Throughput -benchtime 1x -timeout 60m ./e2e

restate-peer: ## the Restate server (npm) and bin/restate-bench, make bench-peers' peer
	cd bench/peers && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	cd bench/peers/restate && $(GO) build -o $(BIN)/restate-bench .

# A count, not a duration: Go 1.26's fuzz coordinator can report its own
# -fuzztime deadline as "context deadline exceeded" on a loaded machine
# (golang/go#75804, fixed in 1.27); a count has no deadline to race.
FUZZTIME ?= 30000x
fuzz: ## a short fuzzing pass over every parser; crashers land in testdata/fuzz/ and stay there as seeds
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./internal/yamldoc
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./internal/manifest
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./internal/plan
	$(GO) test -run '^$$' -fuzz FuzzTemplate -fuzztime $(FUZZTIME) ./internal/plan

dev: build temporal ## dev server + Web UI + worker, then an example run; Ctrl-C stops them
	@$(MAKE) --no-print-directory bubblewrap || echo "bubblewrap could not be installed: tools run unconfined, with a warning (docs/sandbox.md)"
	@$(MAKE) --no-print-directory chromium || echo "chromium could not be installed: browser.run steps (validate-webapp) are gaps until it is (make chromium)"
	@TEMPORAL=$(TEMPORAL) ./scripts/dev.sh

clean:
	rm -rf $(BIN) .capflow
