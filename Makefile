# opi: see README.md. Everything here runs on a fresh machine with Go and the module proxy.
SHELL := /bin/bash
GO ?= go
BIN := bin

.PHONY: build test unit integration generate lint kube-bins cluster cluster-down run

build:
	$(GO) build -o $(BIN)/opi ./cmd/opi

# Builds (once, into a per-user cache) the local control plane's binaries and prints their folder.
kube-bins:
	@tools/kube/build.sh

generate:
	$(GO) generate ./...

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

unit:
	$(GO) tool ginkgo -r --skip-package=integration --fail-on-pending --fail-on-empty --keep-going

integration: kube-bins
	$(GO) tool ginkgo -r --fail-on-pending --fail-on-empty -v integration

test: unit integration
