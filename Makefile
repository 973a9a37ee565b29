# kshard's build and test entry points. `make test` is what CI runs.
GO        ?= go
GOTEST    ?= $(GO) test
# e2e suites start real control planes and OS-process replicas; give them room.
TEST_TIMEOUT ?= 45m
# An execution count, not a duration: a duration races the fuzz coordinator
# (go.dev/issue/75804, unfixed before Go 1.27) and fails a loaded CI run with a
# bare "context deadline exceeded" and no failing input.
FUZZTIME  ?= 150000x
# Rounds of each scenario in chaos-safety.
ROUNDS    ?= 20
# chaos-sharded: the replicas' --balance (0: partitions placed by number).
BALANCE   ?= 0
# chaos-labels, chaos-crshard: how each round's first replicas start:
# together, staggered (one by one, 0.3-4 s apart) or alternate (odd rounds
# together, even rounds staggered).
START     ?= together
# chaos-safety, chaos-sharded, chaos-labels, chaos-inplace: the replicas'
# log verbosity (--v), e.g. V=1 for activations, drains, why claimed
# partitions are not active yet, and the cache's segments and views.
V         ?=

.PHONY: kubectl test api api-check alerts-check docs-check license-check large-files binaries fmt-check vet unit fuzz bench bench-quick bench-scale charts charts-check image image-check chaos-safety chaos-inplace chaos-sharded chaos-labels kit-check kit-check-ci module-check tutorial-check first-run demo release tidy sim sim-assumptions crshard-e2e chaos-crshard chaos-crshard-mapped compat-cr024 compat sim-mutants kubebuilder-check kubelet-e2e kubelet-up kubelet-down

## test: everything CI checks — the docs (README length, relative links, and against the code), the exported API against its record, the license of each published module, no tracked file over 1 MiB, binaries, formatting, vet, tests with -race (unit, integration and e2e against a real API server), a short fuzz run, the alert rules against their fault and clean series (alerts-check), the image check, the test kit and the adapter from the module cache (kit-check-ci, module-check), the tutorial run from its page (tutorial-check), deploy/kubebuilder on a kubebuilder scaffold (kubebuilder-check), a smoke run of the benchmarks and their charts.
test: docs-check api-check license-check large-files binaries fmt-check vet unit fuzz alerts-check image-check kit-check-ci module-check tutorial-check crshard-e2e kubebuilder-check charts-check bench-quick

## binaries: build (first time, ~3-5 min) or reuse the cached kube-apiserver, etcd and kube-controller-manager.
binaries:
	$(GO) run ./hack/ensure-controlplane

## alerts-check: the monitoring files in deploy/monitoring: each alert of the rules file fires on its fault series and stays silent on a clean one (Prometheus's rule engine, v0.316.0, in hack/alertcheck: a module of its own, so kshard's modules do not take Prometheus), the PrometheusRule is generated from the rules file and the Grafana dashboard from hack/alertcheck/dashboard.go (go test . -update there writes both), and every kshard_* metric their queries name is one the code exports. Seconds with a warm build cache; the first build of Prometheus's rule engine takes minutes.
alerts-check:
	cd hack/alertcheck && $(GOTEST) -count=1 ./...

## docs-check: fail when README.md is over 200 lines or a relative link in README.md, CHANGELOG.md, docs/*.md or a package README points to a missing file; and when those docs (CHANGELOG.md's [Unreleased] only) name a Go identifier, a flag of kshard or the example operator, a make target or a test that does not exist, or hold a Go block that does not compile (hack/docscheck: a few seconds with a warm build cache; it builds the workspace's packages and the two binaries).
docs-check:
	hack/check-docs.sh
	$(GO) run ./hack/docscheck

## api: rewrite api/kshard.txt, the record of the published packages' exported API (hack/apicheck -write), after an intended change to it; prints the identifiers and fields per package.
api:
	$(GO) run ./hack/apicheck -write

## api-check: fail when the exported API of the published packages (both modules' packages outside e2e/, hack/, cmd/ and internal/) differs from api/kshard.txt, naming each line added or removed (`make api` records an intended change); prints the identifiers and fields per package. Part of `make test`.
api-check:
	$(GO) run ./hack/apicheck

## license-check: fail when a published module (the root, controller/crshard) lacks its LICENSE (the Apache License 2.0 verbatim: a module zip carries only the LICENSE at its own root) or its NOTICE with the copyright line.
license-check:
	hack/check-license.sh

## large-files: fail on a tracked file over 1 MiB (binaries and outputs belong in .gitignore).
large-files:
	hack/check-large-files.sh

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# Module by module. The repository's go.work holds the root module,
# controller/crshard and e2e/bench/crshardop; the other modules have a
# go.work of their own. In a workspace ./... still matches only the packages
# of the module it is run in (not the nested workspace modules), so each
# line covers one module once.
vet:
	$(GO) vet ./...
	$(GO) vet -tags $(SIM_MUTANT) $(SIM_MUTANT_PKGS)
	$(GO) vet -tags $(STALE_MUTANT) $(STALE_MUTANT_PKGS)
	for m in $(HANDOFF_MUTANTS); do $(GO) vet -tags $$m ./internal/handoff/ || exit 1; done
	cd e2e/bench/baseline && $(GO) vet ./...
	cd e2e/bench/benchkit && $(GO) vet ./...
	cd e2e/bench/kshardop && $(GO) vet ./...
	cd e2e/bench/charts && $(GO) vet ./...
	cd controller/crshard && $(GO) vet ./...
	cd e2e/bench/crshardop && $(GO) vet ./... && $(GO) vet -tags kshardtest ./...
	cd hack/image && $(GO) vet ./...
	cd hack/kitcheck && $(GO) vet ./...
	cd hack/kubebuilder && $(GO) vet ./...
	cd hack/alertcheck && $(GO) vet ./...
	cd e2e/crshard-cr024 && $(GO) vet ./...

# The chaos suite appends its summary line here; go test hides the output of
# passing packages, so the line is printed after the run.
CHAOS_SUMMARY ?= $(CURDIR)/e2e/chaos/summary.out

# The kubectl the tests drive (lease columns, the control plane's smoke
# test, deploy/'s manifests, the e2e inspection command): KSHARD_KUBECTL if
# set, else the one hack/ensure-kubectl.sh builds once from the control
# plane's pinned sources into kshard's cache. Those tests fail without it
# under CI=true, so CI never skips them.
WITH_KUBECTL = KSHARD_KUBECTL=$${KSHARD_KUBECTL:-$$(hack/ensure-kubectl.sh)}

## kubectl: build (first time, a few minutes) or find in kshard's cache kubectl of the control plane's pinned release (hack/ensure-kubectl.sh), which `make unit` and `make kubebuilder-check` hand the tests as KSHARD_KUBECTL; prints its path.
kubectl:
	@hack/ensure-kubectl.sh

unit: kubectl
	@rm -f $(CHAOS_SUMMARY)
	$(WITH_KUBECTL) KSHARD_CHAOS_SUMMARY=$(CHAOS_SUMMARY) $(GOTEST) -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(GOTEST) -race -count=1 -tags $(SIM_MUTANT) -run $(SIM_MUTANT_TESTS) $(SIM_MUTANT_PKGS)
	$(GOTEST) -race -count=1 -tags $(STALE_MUTANT) -run $(STALE_MUTANT_TESTS) $(STALE_MUTANT_PKGS)
	for m in $(HANDOFF_MUTANTS); do $(GOTEST) -count=1 -tags $$m -run '^TestMutant$$' ./internal/handoff/ || exit 1; done
	cd controller/crshard && $(GOTEST) -race -count=1 ./...
	cd hack/kitcheck && $(GOTEST) -race -count=1 ./...
	@cat $(CHAOS_SUMMARY) 2>/dev/null || echo "warning: the chaos suite wrote no summary line"

fuzz:
	@if [ -d internal/membership ] && grep -qs FuzzDecodeClaim internal/membership/*_test.go; then \
		$(GOTEST) -run='^$$' -fuzz=FuzzDecodeClaim -fuzztime=$(FUZZTIME) ./internal/membership/; \
	fi

## bench-quick: smoke run of the kshard vs controller-runtime benchmark (~1-2 min) and its charts; output in e2e/bench/out/, never the committed results.
bench-quick: binaries
	$(GO) run ./e2e/bench -quick -out e2e/bench/out
	$(MAKE) charts BENCH_OUT=$(CURDIR)/e2e/bench/out

## bench: the full benchmark (kshard, the crshard adapter and controller-runtime; phases 7, 8 and 10 on control planes of their own); regenerates e2e/bench/results.json, RESULTS.md and its charts (make charts). On 2 cores every default phase takes about 3 h 45 min (so give BENCH_TIMEOUT=5h) and PHASES=1,2,3,4,5,6,7,8 about 65 min, estimated from the committed runs' per-round times. The throughput rounds of phases 2, 8 and 10 run on 4,000 objects (go run ./e2e/bench -throughput-objects N), the other phases on 2,000: on 2,000 the keys' spread over 4 replicas caps a 4-replica ratio at 3.66× (4,000: 3.82×), and the leader's rounds, twice as long, add about 20 min (PHASES=1,2,8,10 LABELS_PARTS=throughput: 29 min on 2,000, 38 min on 4,000 at 4 workers and 50 ms, 46 min now that the latency-bound rounds run 16 workers at 300 ms, 2026-12-06). PHASES=4,6 runs only those phases and keeps the other phases' figures from the committed results.json (each kept phase names the run that measured it). BENCH_TIMEOUT=5h raises the whole run's deadline (80 min), which phase 10 at 100,000 objects needs: on 2 cores a layout takes about 25 min per round (controller-runtime, kshard with its rolling restart, the adapter) plus about 13 min for the first start and the throughput rounds (about 87 min for the spread layout's 3 rounds). LAYOUTS=single (or spread) runs one of phase 10's layouts and keeps the other's figures; LABELS_PARTS=throughput (with PHASES=10) runs only the spread layout's throughput rounds of phase 10 (ceiling, latency-bound and write-bound on 4,000 BenchObjects, about 18 min) and keeps its memory rounds, handoff and failover and the single layout; BENCH_ROUNDS=1 sets the rounds (default 3). A full run chooses the latency-bound phases' latency from the machine's measured capacity unless BENCH_LATENCY is given (their 16 workers per replica: go run ./e2e/bench -throughput-workers N), and repeats each write-bound run for 30 s.
PHASES ?=
BENCH_TIMEOUT ?=
LAYOUTS ?=
BENCH_ROUNDS ?=
LABELS_PARTS ?=
BENCH_LATENCY ?=
bench: binaries
	$(GO) run ./e2e/bench $(if $(PHASES),-phases $(PHASES)) $(if $(BENCH_TIMEOUT),-timeout $(BENCH_TIMEOUT)) $(if $(LAYOUTS),-labels-layouts $(LAYOUTS)) $(if $(LABELS_PARTS),-labels-parts $(LABELS_PARTS)) $(if $(BENCH_ROUNDS),-rounds $(BENCH_ROUNDS)) $(if $(BENCH_LATENCY),-latency $(BENCH_LATENCY))
	$(MAKE) charts

## bench-scale: phase 9 alone, the scale envelope (kshard at SCALE_REPLICAS=3,16,32,64 replicas, 1021 partitions, SCALE_OBJECTS=10000,100000 objects on the sharded cache, and start → formed against controller-runtime at 10,000, replicas started together and one after the other; LEASE_DURATION fixes one LeaseDuration for every size, default the recommendation per size in docs/configuration.md); about 24 min on 2 cores (rolling restarts wait for make before break), never in CI; keeps the other phases' figures in e2e/bench/results.json.
LEASE_DURATION ?=
bench-scale: binaries
	$(GO) run ./e2e/bench -phases 9 $(if $(SCALE_REPLICAS),-scale-replicas $(SCALE_REPLICAS)) $(if $(SCALE_OBJECTS),-scale-objects $(SCALE_OBJECTS)) $(if $(LEASE_DURATION),-lease-duration $(LEASE_DURATION))
	$(MAKE) charts

## charts: draw the benchmark's charts (throughput.png, rss.png, handoff.png, which RESULTS.md shows) from BENCH_OUT/results.json into BENCH_OUT (default e2e/bench, the committed results) with gonum/plot; e2e/bench/charts is a module of its own, so the kshard module has no plotting dependency. `go run ./e2e/bench -report-only` renders RESULTS.md again from results.json. A few seconds.
BENCH_OUT ?= $(CURDIR)/e2e/bench
charts:
	$(GO) -C e2e/bench/charts run . -results $(BENCH_OUT)/results.json -out $(BENCH_OUT)

## charts-check: the charts module's tests, which draw every chart from the committed results.json into a temporary directory (a few seconds). Part of `make test`. Without -race: the module starts no goroutine, and the race detector makes the rasteriser 20 times slower (~30 s).
charts-check:
	cd e2e/bench/charts && $(GOTEST) -count=1 ./...

## image: build the example operator's image without a container daemon (scratch base, user 65532) into _output/image/: an OCI layout (oci/) and a docker-load archive, tagged ghcr.io/kshard/example-operator:v0.1.0 as deploy/ runs it. REF=… to tag it otherwise.
REF ?=
image:
	$(GO) -C hack/image run . -root $(CURDIR) $(if $(REF),-ref $(REF))

## image-check: build the image in a temporary directory and check it (entrypoint, user 65532, the binary from the layer runs --help, reproducible); ~15 s with a warm build cache, 1-2 min the first time (a CGO_ENABLED=0 build of the operator).
image-check:
	cd hack/image && $(GOTEST) -race -count=1 ./...

## chaos-safety: ROUNDS (default 20) rounds each of the blind-write safety scenarios — a paused replica, and a live member's Lease deleted or relabelled — one at a time (~1 min a round); summary in $(CHAOS_SUMMARY).
chaos-safety: binaries
	@rm -f $(CHAOS_SUMMARY)
	KSHARD_CHAOS_SUMMARY=$(CHAOS_SUMMARY) $(GOTEST) -race -count=1 -timeout 0 -parallel 1 -v \
		-run 'TestPausedReplica|TestDeleteLiveMembersLease|TestRelabelLiveMembersLease' ./e2e/chaos/ -rounds=$(ROUNDS) $(if $(V),-replica-v=$(V))
	@cat $(CHAOS_SUMMARY) 2>/dev/null || echo "warning: the chaos suite wrote no summary line"

## chaos-sharded: ROUNDS (default 20) rounds each of the chaos suite's kill, rolling-restart, scaling and API-server-outage scenarios on the sharded cache (feature gate ShardedListAndWatch, --partition-by=namespace, objects over 24 namespaces); BALANCE=0.02 gives the replicas --balance (a ring placed by object counts; default 0, by number); scenarios run in parallel (~2 min a round); summary in $(CHAOS_SUMMARY).
chaos-sharded: binaries
	@rm -f $(CHAOS_SUMMARY)
	KSHARD_CHAOS_SUMMARY=$(CHAOS_SUMMARY) $(GOTEST) -race -count=1 -timeout 0 -v \
		-run 'TestCrashesUnderContinuousUpdates|TestRollingRestart|TestScaleOneToSixToOne|TestAPIServerOutage' ./e2e/chaos/ -rounds=$(ROUNDS) -sharded -balance=$(BALANCE) $(if $(V),-replica-v=$(V))
	@cat $(CHAOS_SUMMARY) 2>/dev/null || echo "warning: the chaos suite wrote no summary line"

## chaos-labels: ROUNDS (default 20) rounds each of the kill, rolling-restart, scaling and API-server-outage scenarios on the gate-free sharded cache (--cache-mode=labels, key partitioning, no feature gate, objects over 6 namespaces), and of TestLabelTampering (partition labels stripped, edited and replaced through the API server while updates flow); every round also checks that no reconcile read an existing object as NotFound, that every update was reconciled within the round's liveness bound, and at its end that every object is in exactly one live replica's cache with its partition label (docs/testing.md, "Liveness and caches"); scenarios run in parallel (~2 min a round); START=alternate starts odd rounds' replicas together and even rounds' one by one; V=1 runs the replicas at --v=1; a round that does not converge logs and keeps a diagnosis of every replica (docs/testing.md); summary in $(CHAOS_SUMMARY).
chaos-labels: binaries
	@rm -f $(CHAOS_SUMMARY)
	KSHARD_CHAOS_SUMMARY=$(CHAOS_SUMMARY) $(GOTEST) -race -count=1 -timeout 0 -v \
		-run 'TestCrashesUnderContinuousUpdates|TestRollingRestart|TestScaleOneToSixToOne|TestAPIServerOutage|TestLabelTampering' ./e2e/chaos/ -rounds=$(ROUNDS) -labels -start=$(START) $(if $(V),-replica-v=$(V))
	@cat $(CHAOS_SUMMARY) 2>/dev/null || echo "warning: the chaos suite wrote no summary line"

## chaos-inplace: ROUNDS (default 20) rounds each of the proof-of-death scenarios — crash and restart in place (the kubelet's report ends the failover early), a crash reported but not restarted (peers use the report), and a force-deleted pod (its Lease is waited out) — one at a time (~1.5 min a round); summary in $(CHAOS_SUMMARY).
chaos-inplace: binaries
	@rm -f $(CHAOS_SUMMARY)
	KSHARD_CHAOS_SUMMARY=$(CHAOS_SUMMARY) $(GOTEST) -race -count=1 -timeout 0 -parallel 1 -v \
		-run 'TestCrashRestartInPlace|TestForceDeletedPodWaitsTheLease|TestCrashedPodProvenByPeers' ./e2e/chaos/ -rounds=$(ROUNDS) $(if $(V),-replica-v=$(V))
	@cat $(CHAOS_SUMMARY) 2>/dev/null || echo "warning: the chaos suite wrote no summary line"

## sim: the long run of the deterministic handoff simulation: SEEDS (default 1,000,000) seeds from FIRST (default 0), both of the bare core (internal/handoff TestSimulation) and of the real coordinator (shard/ring TestCoordinatorSimulation), each with full caches, again with sharded caches whose LISTs are slow or fail (…PartitionCache), and again with caches sharded by labels (…Labels: labelling that is slow or fails, labels stripped and edited by a third party), and the bare core with a balanced ring (TestSimulationBalance: object counts that change and lag); `make test` runs fewer of each under -race (the flags' defaults in the tests). Both run with the clock-rate and stale-view faults (internal/handoffsim's defaults). Replay one seed with `go test ./shard/ring -run TestCoordinatorSimulation -handoff.seed=S -v` (or ./internal/handoff -run TestSimulation).
SEEDS ?= 1000000
FIRST ?= 0
sim:
	$(GOTEST) -count=1 -timeout 0 -v -run '^(TestSimulation|TestCoordinatorSimulation|TestSimulationPartitionCache|TestCoordinatorSimulationPartitionCache|TestSimulationLabels|TestCoordinatorSimulationLabels|TestSimulationBalance)$$' ./internal/handoff/ ./shard/ring/ \
		-handoff.seeds=$(SEEDS) -handoff.cacheseeds=$(SEEDS) -handoff.labelseeds=$(SEEDS) -handoff.balanceseeds=$(SEEDS) -handoff.first=$(FIRST)

# The core without its defence against stale views of a peer's Lease
# (internal/handoff/stalewatch_mutant.go): a build tag, never a switch of the
# shipped core. make unit runs the unit tests of that defence and the two
# simulations that must catch its absence on the mutant.
STALE_MUTANT       = mutant_trustwatchorder
STALE_MUTANT_TESTS = '^(Test(Coordinator)?SimulationFindsStaleViewsWithoutDefence|TestStaleViewOfPeerKeepsNewestClaim|TestPeerViewObserve|TestMutant)$$'
STALE_MUTANT_PKGS  = ./internal/handoff/ ./shard/ring/

# The core's other mutants (internal/handoff/*_mutant.go, each beside the
# product's file it replaces, one build tag each): every one must break a
# safety invariant of the bare core's simulation (TestMutant) within
# -mutant.seeds (default 10,000) seeds. make unit runs each until its first
# catch, without -race (each seed runs on one goroutine and shares nothing,
# and the race detector would make each mutant's build and run several
# times slower); make sim-mutants counts the seeds that catch them;
# TestMutantsListed fails when a mutant is missing here.
HANDOFF_MUTANTS = mutant_skipdrain mutant_leavingreleased mutant_noreadback mutant_notombstone mutant_forgetprior mutant_renewlapse mutant_noexit mutant_fencelate mutant_podgone mutant_voidunconfirmed mutant_reuseepoch

## sim-mutants: the mutation test of the handoff simulation over MUTANT_SEEDS (default 10000) seeds each, counting the seeds that catch each mutant: the core built as each of its 12 mutants (internal/handoff/*_mutant.go, one build tag each: STALE_MUTANT and HANDOFF_MUTANTS, each a protocol defence removed, such as drain before release, confirm before void or the stale-view defence; TestMutant), and the simulation's labels model built as the cache before issue 41's fix (-tags mutant_issue41: a kind's partition sets sized 0 before the ring's first Hold, out-of-range PartitionSet.Add ignored) over the built-in shell and the coordinator. `make unit` runs every one until its first catch (the core's 12: about 20 s of simulation in all, and a build of the package and its test binary each, 10–40 s on a busy 2-core machine). A mutant's tag is for its tests alone: the package's other tests would judge the mutant, not the product.
SIM_MUTANT       = mutant_issue41
SIM_MUTANT_TESTS = '^Test(Coordinator)?MutantIssue41$$'
SIM_MUTANT_PKGS  = ./internal/handoffsim/ ./shard/ring/
MUTANT_SEEDS    ?= 10000
sim-mutants:
	$(GOTEST) -count=1 -timeout 0 -v -tags $(SIM_MUTANT) -run $(SIM_MUTANT_TESTS) $(SIM_MUTANT_PKGS) -mutant.seeds=$(MUTANT_SEEDS) -mutant.all
	for m in $(STALE_MUTANT) $(HANDOFF_MUTANTS); do $(GOTEST) -count=1 -timeout 0 -v -tags $$m -run '^TestMutant$$' ./internal/handoff/ -mutant.seeds=$(MUTANT_SEEDS) -mutant.all || exit 1; done

## sim-assumptions: the measurements of the handoff simulation's clock-rate and stale-view faults beyond CI — SIM_SEEDS (default 100000) seeds of the bare core's full simulation, and a sweep of clock-rate skews around the tolerated ±9.09 % (SIM_SWEEP, SIM_SWEEP_SEEDS each); figures in the test log.
SIM_SEEDS       ?= 100000
SIM_SWEEP       ?= 8,9,9.5,10,12,20
SIM_SWEEP_SEEDS ?= 5000
sim-assumptions:
	$(GOTEST) -count=1 -timeout 0 -v -run 'TestSimulation$$' ./internal/handoff/ -handoff.seeds=$(SIM_SEEDS) -handoff.first=1000000
	$(GOTEST) -count=1 -timeout 0 -v -run 'TestSimulationClockRateSweep' ./internal/handoff/ -handoff.sweep=$(SIM_SWEEP) -handoff.seeds=$(SIM_SWEEP_SEEDS)

## kit-check-ci: kit-check with the cached binaries (KSHARD_BIN_DIR), so CI proves the kit works from the module cache without rebuilding the control plane (~30 s).
kit-check-ci: binaries
	KIT_BIN_DIR=$$($(GO) run ./hack/ensure-controlplane -print-dir) hack/kitcheck/run.sh

## module-check: the published modules as a user installs them: fails if a module is not tidy, if the root's or controller/crshard's go.mod has a replace or the adapter requires kshard at other than a release version (or go.work resolves another), or if go.work changes the versions they build with; publishes both at one local version into a file:// GOPROXY and builds and runs a scratch module outside the repo (no replace) whose controller-runtime operator, converted with the adapter, runs two replicas on a real control plane (~1 min with warm caches). Part of `make test`.
module-check: binaries
	KIT_BIN_DIR=$$($(GO) run ./hack/ensure-controlplane -print-dir) hack/kitcheck/modulecheck.sh

## tutorial-check: docs/tutorial.md run end to end outside the repository from its own blocks (hack/tutorial/run.sh): its files written and its shell blocks run in order — a new module, types and CRD generated with controller-gen, the operator built, its test kit test of three replicas through a rolling restart on a real control plane, its manifests by server-side dry run — with kshard published from the checkout into a file:// module proxy where the page says v0.1.0. Part of `make test`.
tutorial-check: binaries
	KIT_BIN_DIR=$$($(GO) run ./hack/ensure-controlplane -print-dir) hack/tutorial/run.sh

## release: VERSION=vX.Y.Z: build and check locally everything a release publishes (hack/release/release.sh), into _output/release/VERSION/: both modules in a file:// module proxy, the example operator's image tagged VERSION with its module list, release notes from CHANGELOG.md's [Unreleased]; then a project scaffolded by kubebuilder (hack/kubebuilder's pin) takes the adapter from that proxy with go get, is converted as docs/adapter.md says, and builds with GOWORK=off, stays tidy and builds as its Dockerfile does. Tagging and pushing are the maintainer's steps after it (docs/install.md).
release:
	@test -n "$(VERSION)" || { echo "make release: set VERSION=vX.Y.Z" >&2; exit 2; }
	hack/release/release.sh $(VERSION)

## demo: build the kshard CLI and the example operator, with a progress line every 15 s, and run `kshard demo` (ARGS passes flags: make demo ARGS='--replicas 4'): a local control plane, replicas, Widgets and a live handoff; the first run also builds the control plane (see README.md, "Try it").
demo:
	hack/demo.sh $(ARGS)

## first-run: a newcomer's first `make demo` timed on this machine from a fresh clone with empty Go module, build and kshard binary caches (hack/firstrun.sh, all in a temporary directory): seconds to the first line, to kshard built, to the control plane up and to the handoff report. Not in CI: it builds the control plane from source (about 10 min on 2 idle cores, 30 or more on busy ones).
first-run:
	hack/firstrun.sh

## tidy: go mod tidy in every module but hack/tools (hack/tools/pin.sh writes that one); controller/crshard through a copy of its go.mod that resolves kshard from the checkout, since go mod tidy ignores go.work and the release version it requires is published only when tagged.
tidy:
	hack/tidy.sh

## kit-check: a scratch module outside the repo, with kshard only in the module cache (a file:// GOPROXY holding a zip of this checkout), runs a tiny operator's 3-replica rolling restart through the test kit, building the control plane through the kit's own tools module into an empty cache (KIT_BIN_DIR=dir to use prebuilt binaries). Not in CI: ~1 min with a warm Go build cache, ~25 min cold on 2 busy cores.
kit-check:
	hack/kitcheck/run.sh

## kubebuilder-check: the kustomize component deploy/kubebuilder on the scaffold kubebuilder users have: scaffolds a project with the kubebuilder CLI (v4.16, pinned with its controller-gen by the tools module hack/kubebuilder and built into kshard's cache: ~8 min the first time), turns on metrics with the authenticated endpoint, the network policy, the ServiceMonitor, the webhook and cert-manager, converts its config as docs/adapter.md says and checks the render (every patch finds its target, the StatefulSet carries the Deployment's pod template, metrics on, the Services select its pods) and a server-side dry run (TestKubebuilderComponent).
kubebuilder-check: binaries kubectl
	$(WITH_KUBECTL) KSHARD_KUBEBUILDER_CHECK=1 $(GOTEST) -race -count=1 -timeout 30m -run '^TestKubebuilderComponent$$' -v ./e2e/deploy

## crshard-e2e: the controller-runtime adapter end to end: 3 replicas of the converted baseline operator (e2e/bench/crshardop, built with -tags kshardtest to record its reconciles) on a real control plane through a rolling restart and a SIGKILL, checked for overlaps and lost updates (~1 min with the binaries cached). Part of `make test`.
crshard-e2e: binaries
	cd e2e/bench/crshardop && $(GOTEST) -race -count=1 -timeout 15m -run TestConvertedOperatorHandsOff -v .

## chaos-crshard: ROUNDS (default 20) rounds each of the chaos scenarios run on the converted controller-runtime operator — a SIGKILL, a rolling restart, scaling 3→5→2→3, an API-server outage past LeaseDuration — each round on a fresh control plane, checked for overlaps and lost updates (~1 min a round); CACHE_MODE=labels runs them on the ring's sharded cache; START=alternate starts odd rounds' replicas together and even rounds' one by one; summary in $(CHAOS_SUMMARY).
chaos-crshard: binaries
	@rm -f $(CHAOS_SUMMARY)
	cd e2e/bench/crshardop && KSHARD_CHAOS_SUMMARY=$(CHAOS_SUMMARY) $(GOTEST) -race -count=1 -timeout 0 -v -run TestConvertedOperatorChaos . -rounds=$(ROUNDS) -start=$(START) $(if $(CACHE_MODE),-cache-mode=$(CACHE_MODE))
	@cat $(CHAOS_SUMMARY) 2>/dev/null || echo "warning: the chaos suite wrote no summary line"

## chaos-crshard-mapped: ROUNDS (default 20) rounds each of a SIGKILL, a rolling restart and scaling 3→5→2→3 on a converted controller-runtime operator whose only source maps the kit's ConfigMaps to its keys with EnqueueRequestsFromMapFunc (e2e/bench/crshardop/mapped: no For objects, so only the replay of its Watches handler recovers an event dropped during a handoff), checked for overlaps and lost updates (~1 min a round); summary in $(CHAOS_SUMMARY).
chaos-crshard-mapped: binaries
	@rm -f $(CHAOS_SUMMARY)
	cd e2e/bench/crshardop && KSHARD_CHAOS_SUMMARY=$(CHAOS_SUMMARY) $(GOTEST) -race -count=1 -timeout 0 -v -run TestMappedOperatorChaos . -rounds=$(ROUNDS)
	@cat $(CHAOS_SUMMARY) 2>/dev/null || echo "warning: the chaos suite wrote no summary line"

## compat: the Kubernetes version matrix (not in CI, which tests the pin in hack/tools): for each minor in COMPAT_VERSIONS (default 1.34 1.35 1.36 1.37; pins in hack/tools/compat, written by hack/tools/pin.sh -o), builds that control plane into the kit's cache once (~10-12 min each on a quiet machine) and runs on it the lease integration tests with the kubectl get leases -L columns, the ring's and the labels-mode cache's integration tests, chaos-labels' crash, rolling-restart and label-tampering scenarios and the adapter's chaos scenario, COMPAT_ROUNDS rounds each (default 3; ~25 min a version); results in e2e/compat/RESULTS.md, logs in /tmp/kshard-compat.
COMPAT_VERSIONS ?= 1.34 1.35 1.36 1.37
COMPAT_ROUNDS   ?= 3
compat:
	COMPAT_ROUNDS=$(COMPAT_ROUNDS) hack/compat.sh $(COMPAT_VERSIONS)

## compat-cr024: the adapter on controller-runtime v0.24 (with the k8s.io v0.37 modules), as an operator that stays on v0.24 builds it (the adapter requires v0.25; e2e/crshard-cr024 pins v0.24.1 with a replace): checks the versions built, runs the adapter's own tests (-race) under them, builds the chaos operators there (e2e/bench/crshardop and its mapped variant, -tags kshardtest) and runs chaos-crshard's and chaos-crshard-mapped's scenarios on them, ROUNDS rounds each (default 3 here; ~1 min a round and scenario, about 25 min at 3 rounds); summary in $(CHAOS_SUMMARY).
CR024_ROUNDS = $(if $(filter command line environment,$(origin ROUNDS)),$(ROUNDS),3)
compat-cr024: binaries
	@rm -f $(CHAOS_SUMMARY)
	cd e2e/crshard-cr024 && $(GO) run . && $(GOTEST) -race -count=1 ./... github.com/kshard/kshard/controller/crshard
	@set -e; ops=$$(mktemp -d); trap 'rm -rf "$$ops"' EXIT; \
	(cd e2e/crshard-cr024 && $(GO) build -tags kshardtest -o "$$ops/" github.com/kshard/kshard/e2e/bench/crshardop github.com/kshard/kshard/e2e/bench/crshardop/mapped); \
	cd e2e/bench/crshardop && KSHARD_CHAOS_SUMMARY=$(CHAOS_SUMMARY) $(GOTEST) -race -count=1 -timeout 0 -v \
		-run 'TestConvertedOperatorChaos|TestMappedOperatorChaos' . -rounds=$(CR024_ROUNDS) -operators="$$ops"
	@cat $(CHAOS_SUMMARY) 2>/dev/null || echo "warning: the chaos suite wrote no summary line"

## kubelet-e2e: deploy/ on a real one-node cluster on this machine (root; not in CI): etcd, kube-apiserver, kube-controller-manager (all default controllers), kube-scheduler, containerd v2.4.2 (runc 1.1.5 and the CNI plugins from Debian) and a kubelet, built from pinned sources (hack/tools/kubelet, hack/tools/containerd) and cached in ~/.cache/kshard by hack/kubelet (first build ~10 min), run in a network namespace of their own; a pod of a pause image built here; the image of `make image` and `kubectl apply -k hack/kubelet/overlay` until the pods are Ready; then runtime kills (restart-in-place timings from the kubelet's statuses), a rollout restart, a pod deletion, an eviction against the PDB and scaling 3 -> 5 -> 2, on deploy/'s StatefulSet (ring and Widgets checked) and on a recording test operator (the test kit's checker: overlaps, lost updates, NotFound, liveness); 4-8 min cached. The node is taken down after, leaving no process, mount, cgroup or namespace (KSHARD_KUBELET_KEEP=1 keeps it up). docs/testing.md says what is still missing.
kubelet-e2e:
	hack/kubelet/e2e.sh

## kubelet-up: start the one-node cluster of kubelet-e2e and leave it running (`eval "$$(hack/kubelet/node.sh env)"` to use it); kubelet-down stops it and removes everything it made.
kubelet-up:
	hack/kubelet/node.sh up

kubelet-down:
	hack/kubelet/node.sh down
