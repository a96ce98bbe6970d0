# Hutch build targets. `make help` lists them.
GO ?= go
BIN := bin

.PHONY: help build test bench bench-headline demo clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build hutchd, hutch, hutch-init (static) and the examples into ./bin
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/hutchd ./cmd/hutchd
	$(GO) build -o $(BIN)/hutch ./cmd/hutch
	CGO_ENABLED=0 $(GO) build -o $(BIN)/hutch-init ./cmd/hutch-init
	$(GO) build -o $(BIN)/agent-session ./examples/agent-session
	$(GO) build -o $(BIN)/dev-server ./examples/dev-server

test: ## run the whole test suite (as root)
	bash scripts/test.sh

bench: ## measure create→first exec and exec round trip against raw runc (as root)
	$(GO) run ./test/bench

bench-headline: ## lifecycle headline on real input: npm ci, backup, restore, snapshot, fork 4 (as root; minutes)
	$(GO) run ./test/bench -headline

demo: ## the README's first command
	bash scripts/demo.sh

clean: ## remove ./bin
	rm -rf $(BIN)
