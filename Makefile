# opi: see README.md. Everything here runs on a fresh machine with Go and the module proxy.
SHELL := /bin/bash
GO ?= go
BIN := bin

.PHONY: build image test unit integration fuzz generate lint kube-bins cluster cluster-down run opi-local

# opi --version prints VERSION (default: git describe of the checkout).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS := -X main.buildVersion=$(VERSION)

# opi and the node agent's own binary (`opi agent` execs the opi-agent next to it).
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/opi ./cmd/opi
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/opi-agent ./cmd/opi-agent

# The container image, without a container engine: a static opi and opi-agent (the flags are
# those of cmd/opi-image's test, which shares the build cache) on a minimal base cmd/opi-image writes
# itself. bin/opi-image.tar is for `docker load` / `podman load`; bin/opi-oci is an OCI image
# layout (e.g. `skopeo copy oci:bin/opi-oci docker://REGISTRY/opi:TAG`). IMAGE names it.
IMAGE ?= opi-bridge/opi:$(VERSION)
image:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/image/opi ./cmd/opi
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/image/opi-agent ./cmd/opi-agent
	$(GO) run ./cmd/opi-image --binary $(BIN)/image/opi --agent-binary $(BIN)/image/opi-agent --version $(VERSION) --tag $(IMAGE) --tar $(BIN)/opi-image.tar --layout $(BIN)/opi-oci

# Builds (once, into a per-user cache) the local control plane's binaries and prints their folder.
kube-bins:
	@tools/kube/build.sh

generate:
	$(GO) generate ./...

# go vet, gofmt, and go.mod/go.sum exactly as `go mod tidy` leaves them (direct dependencies
# not marked // indirect), in the product module and in the tools' module (test/, its own
# go.mod); then the generated fakes are current (`go generate ./...` in a copy of the tree
# changes no file: tools/check-generated.sh).
TEST_MODULE := test
lint:
	$(GO) vet ./...
	$(GO) -C $(TEST_MODULE) vet ./...
	$(GO) mod tidy -diff
	$(GO) -C $(TEST_MODULE) mod tidy -diff
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@tools/check-generated.sh

# Unit suites: everything but the suites that start a local control plane; then the tools'
# module's suites (test/: ginkgo -r would reach them from here too, so the first step skips
# them and they run once, in their own module); then the fuzz targets' seed corpora (go test
# runs them as ordinary tests; the tools have none).
GINKGO_UNIT := tool ginkgo -r --succinct=false --fail-on-pending --fail-on-empty --keep-going --race
unit:
	$(GO) $(GINKGO_UNIT) --skip-package=integration,localkube,./$(TEST_MODULE)/
	$(GO) -C $(TEST_MODULE) $(GINKGO_UNIT)
	$(GO) test -run '^Fuzz' ./...

# Fuzzes each target for FUZZTIME (e.g. make fuzz FUZZTIME=5m).
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzzing $$t in $$pkg"; $(GO) test $$pkg -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) || exit 1; \
	  done; \
	done

# Suites on a real local control plane (built on first use): localkube's own, then opi's once
# per backend (OPI_TEST_BACKEND; INTEGRATION_BACKENDS=statefulsets runs one).
INTEGRATION_BACKENDS ?= deployments statefulsets
GINKGO_INTEGRATION := $(GO) tool ginkgo --succinct=false --fail-on-pending --fail-on-empty --keep-going --timeout=45m
integration: kube-bins
	$(GINKGO_INTEGRATION) localkube
	@set -e; for b in $(INTEGRATION_BACKENDS); do \
	  echo "== integration suite, backend $$b"; \
	  OPI_TEST_BACKEND=$$b $(GINKGO_INTEGRATION) integration; \
	done

test: unit integration

# --- A local control plane to try opi by hand (independent of `make test`) ---
LOCAL := .local

opi-local:
	$(GO) build -o $(BIN)/opi-local ./cmd/opi-local

# Starts a control plane in the background: pid in .local/cluster.pid, output in .local/cluster.log.
# CLUSTER_FLAGS passes more flags, e.g. CLUSTER_FLAGS="--nodes 3 --node-memory 8Gi".
cluster: opi-local kube-bins
	@mkdir -p $(LOCAL)
	@if [ -f $(LOCAL)/cluster.pid ] && kill -0 "$$(cat $(LOCAL)/cluster.pid)" 2>/dev/null; then \
	  echo "a cluster is already running (pid $$(cat $(LOCAL)/cluster.pid)); make cluster-down stops it"; exit 1; fi
	@rm -f $(LOCAL)/kubeconfig
	@nohup $(BIN)/opi-local cluster --kubeconfig-out $(LOCAL)/kubeconfig $(CLUSTER_FLAGS) >$(LOCAL)/cluster.log 2>&1 </dev/null & \
	  echo $$! >$(LOCAL)/cluster.pid
	@pid=$$(cat $(LOCAL)/cluster.pid); echo "starting the control plane (pid $$pid, log $(LOCAL)/cluster.log)..."; \
	for i in $$(seq 1 600); do \
	  [ -f $(LOCAL)/kubeconfig ] && break; \
	  if ! kill -0 $$pid 2>/dev/null; then \
	    echo "opi-local cluster exited:"; tail -n 30 $(LOCAL)/cluster.log; rm -f $(LOCAL)/cluster.pid; exit 1; fi; \
	  sleep 0.5; \
	done; \
	if [ ! -f $(LOCAL)/kubeconfig ]; then \
	  echo "no kubeconfig after 5 minutes; see $(LOCAL)/cluster.log; make cluster-down stops it"; exit 1; fi; \
	kubectl=$$(tools/kube/build.sh 2>/dev/null)/kubectl; \
	echo "cluster ready. Use it with:"; \
	echo "  export KUBECONFIG=$$PWD/$(LOCAL)/kubeconfig"; \
	echo "  $$kubectl get nodes,pods -A"; \
	echo "make cluster-down stops it."

# Stops the cluster started by `make cluster` (SIGTERM; SIGKILL if it is still up after 30 s).
cluster-down:
	@if [ ! -f $(LOCAL)/cluster.pid ]; then echo "no cluster to stop ($(LOCAL)/cluster.pid is missing)"; exit 0; fi; \
	pid=$$(cat $(LOCAL)/cluster.pid); \
	if grep -qa opi-local /proc/$$pid/cmdline 2>/dev/null; then \
	  kill -TERM $$pid; \
	  for i in $$(seq 1 60); do kill -0 $$pid 2>/dev/null || break; sleep 0.5; done; \
	  if kill -0 $$pid 2>/dev/null; then echo "still running after 30 s: sending SIGKILL"; kill -KILL $$pid; fi; \
	  echo "cluster stopped"; \
	else \
	  echo "pid $$pid is not opi-local any more: nothing to stop"; \
	fi; \
	rm -f $(LOCAL)/cluster.pid

# Builds opi and runs it against a fresh local control plane in the foreground, with a Cloud
# Controller stand-in (mutual TLS; it prints each callback with a "cc-standin:" prefix) and an
# image registry holding a sample image for staging; Ctrl-C stops them all.
# RUN_FLAGS passes more flags, e.g. RUN_FLAGS="--listen 127.0.0.1:9000 --nodes 2".
# RUN_FLAGS="--agent" also runs opi agent for each node against a Loggregator stand-in (docs/logging.md).
run: build opi-local kube-bins
	@if [ -f $(LOCAL)/cluster.pid ] && kill -0 "$$(cat $(LOCAL)/cluster.pid)" 2>/dev/null; then \
	  echo "make cluster is running and owns $(LOCAL)/kubeconfig: make cluster-down first"; exit 1; fi
	$(BIN)/opi-local run --opi-bin $(BIN)/opi --kubeconfig-out $(LOCAL)/kubeconfig $(RUN_FLAGS)

# --- Benchmark (see docs/benchmarks.md) ---
# One run on a fresh local control plane: desire N apps through opi in batches of 500 (two
# client-go floors on some batches, cleaned up after each), reads at N, opi's restart at N, stop;
# prints a markdown table and a JSON line. RECORD=1 appends the JSON line to
# docs/benchmarks/runs.jsonl and regenerates docs/benchmarks.md's tables from it (what `make
# bench-report` does). BACKEND=statefulsets benchmarks the StatefulSet backend (the floor and the
# live LIST then use StatefulSets too). BENCH_FLAGS passes more flags (bin/opi-bench -h lists them).
# The driver is test/cmd/opi-bench, in the tools' own module (test/go.mod). ROUTING=nats measures
# routing mode nats against an in-process nats-server instead (docs/benchmarks.md, "Routing nats").
N ?= 300
BACKEND ?= deployments
RECORD ?=
BENCH_FLAGS ?=
BENCH_RUNS := docs/benchmarks/runs.jsonl
BENCH_DOC := docs/benchmarks.md
BENCH_RECORD = $(if $(RECORD),-record $(BENCH_RUNS) -doc $(BENCH_DOC))
ROUTING ?=

.PHONY: bench bench-report opi-bench
opi-bench:
	$(GO) -C $(TEST_MODULE) build -o $(CURDIR)/$(BIN)/opi-bench ./cmd/opi-bench

bench: build opi-bench
	$(BIN)/opi-bench -n $(N) -backend $(BACKEND) -opi-bin $(BIN)/opi $(if $(ROUTING),-routing $(ROUTING)) $(BENCH_RECORD) $(BENCH_FLAGS)

# Regenerates docs/benchmarks.md's tables (latest value per figure, with its date) from the
# recorded runs; test/cmd/opi-bench's suite checks the committed tables are what this makes.
bench-report: opi-bench
	$(BIN)/opi-bench report -runs $(BENCH_RUNS) -doc $(BENCH_DOC)

# Tasks instead of LRPs: TASKS task desires, GET /tasks at TASKS (with opi's API requests per
# call), cancels. `make bench-tasks TASKS=1000 RECORD=1` records a run.
TASKS ?= 300

.PHONY: bench-tasks
bench-tasks: build opi-bench
	$(BIN)/opi-bench -tasks $(TASKS) -opi-bin $(BIN)/opi $(BENCH_RECORD) $(BENCH_FLAGS)

# The node agent: 110 pods' log files (1,000 files, 1 million lines) read by the agent binary as
# shipped (bin/opi-agent, against a loopback API server stand-in serving the pods) into the
# Loggregator stand-in: lines per CPU second, RSS, the delay from a line written to its envelope
# received. `make bench-agent RECORD=1` records a run.
.PHONY: bench-agent
bench-agent: build opi-bench
	$(BIN)/opi-bench agent -agent-bin $(BIN)/opi-agent $(BENCH_RECORD) $(BENCH_FLAGS)

# `opi ssh-proxy` on a local control plane: session setup p50/p99 with 50 clients at once (dial,
# the one-time code through the stand-ins, `echo ok` through pods/exec), and one tunnel stream
# through OpenSSH's `ssh -N -L` against `kubectl port-forward` to the same pod port, in turns.
# `make bench-ssh RECORD=1` records a run.
.PHONY: bench-ssh
bench-ssh: build opi-bench
	$(BIN)/opi-bench ssh -opi-bin $(BIN)/opi -backend $(BACKEND) $(BENCH_RECORD) $(BENCH_FLAGS)

# --- Load test (independent of `make test`) ---
# 50 concurrent clients mixing every LRP route on a local control plane for DURATION (at most
# MAX_REQUESTS requests), then Kubernetes and GET /apps are compared with the driver's model.
# Fails on any 5xx, unexpected answer or difference. LOAD_FLAGS passes more flags (e.g. --admin).
# The driver is test/cmd/opi-load, in the tools' own module (test/go.mod).
.PHONY: load
DURATION ?= 60s
MAX_REQUESTS ?= 200000
load: build kube-bins
	$(GO) -C $(TEST_MODULE) build -o $(CURDIR)/$(BIN)/opi-load ./cmd/opi-load
	OPI_KUBE_BIN_DIR=$$(tools/kube/build.sh) $(BIN)/opi-load --opi-bin $(BIN)/opi --duration $(DURATION) --max-requests $(MAX_REQUESTS) $(LOAD_FLAGS)
