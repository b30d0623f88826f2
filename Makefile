# anchorage — see README.md. Every target does its own set-up on a fresh machine.
K8S_VERSION ?= 1.35.4
K8S_BIN_DIR := $(CURDIR)/bin/k8s/$(K8S_VERSION)
export KUBEBUILDER_ASSETS ?= $(K8S_BIN_DIR)
# The data-plane oracle (hack/build-edge-translate.sh): the tests and the demo run it.
export EDGE_TRANSLATE ?= $(CURDIR)/bin/edge-translate
# cert-manager's controller, external-dns and Pebble (hack/build-cert-manager.sh,
# hack/build-external-dns.sh, hack/build-pebble.sh): tests run them against real API
# servers.
export CERT_MANAGER_CONTROLLER ?= $(CURDIR)/bin/cert-manager-controller
export EXTERNAL_DNS ?= $(CURDIR)/bin/external-dns
export PEBBLE ?= $(CURDIR)/bin/pebble
GO_FILES = $(shell find . -name '*.go' -not -path './bin/*' -not -path './tmp/*')
# Packages run one at a time: the integration suites and the demo each start several
# API servers, and timing-sensitive tests must not compete for 2 cores.
TEST_FLAGS ?= -count=1 -p 1 -timeout 50m

# The manager's version stamp (make build, make docker-build): internal/version.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -X anchorage/internal/version.Version=$(VERSION) -X anchorage/internal/version.Commit=$(COMMIT) -X anchorage/internal/version.BuildDate=$(DATE)
# The image make docker-build builds and make deploy puts into the Deployment.
IMG ?= anchorage-manager:dev
CONTAINER_TOOL ?= docker
KUBECTL ?= kubectl
# What make deploy and make undeploy apply and delete: config/default or an overlay.
DEPLOY_DIR ?= config/default
# Extra flags for make run, e.g. RUN_FLAGS=--config=dev.yaml.
RUN_FLAGS ?=
# The hub-faults schedule of make bench-smoke-suspectexpires: a watch stall on every
# replica first and no fault within it that would explain (and so excuse) a hand-over,
# so that whether the reverted rule is caught does not hang on a drawn schedule.
SUSPECT_SEED ?= 20

.PHONY: help all test unit lint k8s-binaries edge-translate cert-manager external-dns pebble dns-server manifests build run docker-build deploy undeploy tools demo fuzz bench bench-failover bench-fair-share bench-smoke bench-smoke-nogate bench-smoke-suspectexpires bench-binaries
.DEFAULT_GOAL := all

## help: every target with what it does: the `## target:` comment block above each one.
help:
	@awk '/^## / { block = block (block == "" ? "" : " ") substr($$0, 4); next } \
		/^[a-zA-Z][a-zA-Z0-9_-]*:/ { name = $$0; sub(/:.*/, "", name); desc = block; \
			if (index(desc, name ": ") == 1) desc = substr(desc, length(name) + 3); \
			if (block != "") printf "  %-20s %s\n", name, desc } \
		{ block = "" }' $(firstword $(MAKEFILE_LIST))

## all: the default goal, same as build.
all: build

## test: build the control-plane binaries, the data-plane oracle, cert-manager's
## controller, external-dns and Pebble if missing, install kubectl, promtool and Knot DNS
## if missing, lint, then run unit and integration tests.
test: k8s-binaries edge-translate cert-manager external-dns pebble tools dns-server lint
	go test $(TEST_FLAGS) ./...

## unit: tests that need no API server.
unit:
	go test $(TEST_FLAGS) -short ./...

## lint: go vet, gofmt, and every patch of bench/mutants still applies (hack/mutant.sh).
lint:
	go vet ./...
	@for p in bench/mutants/*.patch; do git apply --check "$$p" || { echo "$$p no longer applies: update it with the code it changes"; exit 1; }; done
	@out="$$(gofmt -l $(GO_FILES))"; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## tools: kubectl and promtool from Debian's packages, when missing (hack/install-tools.sh).
tools:
	@hack/install-tools.sh

## k8s-binaries: etcd, kube-apiserver, kube-controller-manager built offline into bin/k8s/<version>.
k8s-binaries:
	@K8S_VERSION=$(K8S_VERSION) hack/build-k8s.sh >/dev/null

## edge-translate: Envoy Gateway's translator, the data-plane oracle, built offline into
## bin/edge-translate (hack/edge-translate).
edge-translate:
	@hack/build-edge-translate.sh >/dev/null

## cert-manager: cert-manager's controller, built offline into bin/cert-manager-controller
## (hack/cert-manager), for tests that issue real Certificates.
cert-manager:
	@hack/build-cert-manager.sh >/dev/null

## external-dns: external-dns, built offline into bin/external-dns (hack/external-dns), for
## tests that publish DNS records.
external-dns:
	@hack/build-external-dns.sh >/dev/null

## pebble: Pebble, Let's Encrypt's ACME test server, built offline into bin/pebble
## (hack/pebble), for tests that order Certificates from an ACME ClusterIssuer.
pebble:
	@hack/build-pebble.sh >/dev/null

## dns-server: Knot DNS from Debian's packages, when missing (hack/install-dns-server.sh):
## the server external-dns writes to in tests.
dns-server:
	@hack/install-dns-server.sh

## manifests: regenerate CRDs, deepcopy and RBAC from markers.
manifests:
	hack/manifests.sh

## demo: a local hub, two project planes and three manager processes, narrated end to end.
## DEMO_KEEP=1 (or DEMO_FLAGS=--keep) leaves everything running and prints the kubeconfigs.
demo: k8s-binaries edge-translate cert-manager external-dns dns-server build
	go build -o bin/demo ./cmd/demo
	bin/demo --manager=bin/manager $(DEMO_FLAGS)

## build: the manager binary into bin/manager, stamped with VERSION, COMMIT and DATE.
build:
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o bin/manager ./cmd/manager

## run: bin/manager against the hub in $KUBECONFIG as $(whoami)-local, plain-HTTP
## metrics on :8080 (no TokenReview), health on :8081; add flags with RUN_FLAGS=.
run: build
	bin/manager --identity=$$(whoami)-local --metrics-secure=false --metrics-bind-address=:8080 \
		--health-probe-bind-address=:8081 $(RUN_FLAGS)

## docker-build: the manager image IMG (anchorage-manager:dev), a static binary on scratch.
docker-build:
	$(CONTAINER_TOOL) build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) \
		--build-arg DATE=$(DATE) -t $(IMG) .

## deploy: apply config/namespace (once, kept forever), then DEPLOY_DIR (config/default)
## with its image set to IMG, to the cluster of the current kubectl context.
deploy:
	$(KUBECTL) apply -k config/namespace
	$(KUBECTL) kustomize $(DEPLOY_DIR) | sed 's|image: anchorage-manager:latest$$|image: $(IMG)|' | $(KUBECTL) apply -f -

## undeploy: delete what deploy applied from DEPLOY_DIR; never the namespace, which
## holds the projects' kubeconfig Secrets and the Leases.
undeploy:
	$(KUBECTL) delete -k $(DEPLOY_DIR) --ignore-not-found

## fuzz: one minute of fuzzing on the anchor label decoder.
fuzz:
	go test -run='^$$' -fuzz=FuzzDecode -fuzztime=60s ./pkg/anchor

## bench-binaries: the manager, the baseline manager (multicluster-runtime's
## coordinator/sharded), the harness, and bin/manager-skew: the manager with
## bench/mutants/skew.patch applied in a scratch copy (hack/mutant.sh; never shipped),
## whose clock ANCHORAGE_BENCH_CLOCK_OFFSET sets off, for the skew scenario; into bin/.
bench-binaries: build
	LDFLAGS="$(LDFLAGS)" hack/mutant.sh skew bin/manager-skew
	go build -o bin/baseline-manager ./bench/cmd/baseline-manager
	go build -o bin/bench ./bench/cmd/bench

## bench: the full chaos and benchmark run, both coordinators side by side: scenarios
## kill, pause, scale, rolling, skew and hub-faults (about 10 minutes), the Lease-write
## and memory runs (about 7), then the data-path section (20 planes x 1,000 proxies, 3
## replicas; about 21, CPU-bound here); about 39 minutes on 2 cores (bench/README.md,
## Duration). The failover runs are make bench-failover. Writes bench/out/report.md,
## results.json and plots. Not part of make test. One section only:
## BENCH_FLAGS='--only data-path' (add --data-path-small for a development size).
bench: k8s-binaries bench-binaries
	bin/bench --out bench/out $(BENCH_FLAGS)

## bench-failover: the failure hand-over of 1,000 light projects on a hub delayed 200 ms,
## at the fast and the default Lease timings, both coordinators (about 20 minutes on 2
## cores); not part of make bench. Writes bench/out/failover/report.md.
bench-failover: k8s-binaries bench-binaries
	bin/bench --only failover --out bench/out/failover $(BENCH_FLAGS)

## bench-fair-share: one hostile project (10,000 proxies, a plane answering 200 ms late)
## beside nine normal ones on one replica: the normal projects' time to Programmed
## beside it and alone, side by side (about 15 minutes on 2 cores); not part of make
## bench. Writes bench/out/fairshare/report.md.
bench-fair-share: k8s-binaries bench-binaries
	bin/bench --only fair-share --out bench/out/fairshare $(BENCH_FLAGS)

## bench-smoke: kill, pause and a short hub-faults schedule on anchorage only (under 5
## minutes); fails on a correctness violation (overlap, late write in a pause or under
## hub faults, anchor left, wrongful deletion, a project not owned again once the hub
## faults are lifted), never on a timing. Run by .ci/run.
bench-smoke: k8s-binaries bench-binaries
	bin/bench --smoke --out bench/out/smoke $(BENCH_FLAGS)

## bench-smoke-nogate: the same smoke run against the manager with
## bench/mutants/nogate.patch applied (validity gate off; never shipped). It is expected
## to fail: it shows the smoke gate catches what the validity gate prevents.
bench-smoke-nogate: k8s-binaries bench-binaries
	hack/mutant.sh nogate bin/manager-nogate
	bin/bench --smoke --coordinators anchorage-nogate --out bench/out/smoke-nogate $(BENCH_FLAGS)

## bench-smoke-suspectexpires: the smoke run's hub-faults schedule against the manager
## with bench/mutants/suspectexpires.patch applied (a member the coordinator has not
## seen renew loses its projects at once; never shipped). It is expected to fail: it
## shows the hub-faults gate catches the second owner, on the pinned schedule
## SUSPECT_SEED (bench/README.md says why).
bench-smoke-suspectexpires: k8s-binaries bench-binaries
	hack/mutant.sh suspectexpires bin/manager-suspectexpires
	bin/bench --smoke --coordinators anchorage-suspectexpires --scenarios hub-faults --hub-faults-seed=$(SUSPECT_SEED) --out bench/out/smoke-suspectexpires $(BENCH_FLAGS)
