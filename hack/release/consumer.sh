#!/usr/bin/env bash
# hack/release/consumer.sh VERSION PROXY_DIR WORK_DIR: the release's proof
# from outside the repository. A project scaffolded by kubebuilder itself
# (the version hack/kubebuilder pins) takes the adapter at VERSION with
# `go get` from the file:// proxy in PROXY_DIR, is converted as
# docs/adapter.md says (crshard.New and ring.NewManager in cmd/main.go,
# crshard.ControllerManagedBy in the controller), and must then: have no
# replace directive and no go.work, build with GOWORK=off, stay tidy, and
# build as its Dockerfile's go steps build it (run in a directory holding
# only what the Dockerfile copies).
set -euo pipefail
version=${1:?usage: consumer.sh VERSION PROXY_DIR WORK_DIR}
proxy=${2:?usage: consumer.sh VERSION PROXY_DIR WORK_DIR}
work=${3:?usage: consumer.sh VERSION PROXY_DIR WORK_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
step() { echo "release $version: consumer: $*"; }
fail() { echo "release $version: consumer: $*" >&2; exit 1; }

tools=$("$root/hack/kubebuilder/ensure.sh")
project="$work/widgets"
mkdir -p "$project"
cd "$project"
# Only the file:// proxy knows VERSION (no checksum database does); every
# other module comes from the module cache or the configured proxy.
export GOPROXY="file://$proxy,$(go env GOPROXY)" GONOSUMDB=github.com/kshard/kshard GOWORK=off GOFLAGS=-mod=mod
# The go command indexes a module-cache directory once per module@version
# and trusts the index forever (module versions are immutable). A release
# rebuilt at the same VERSION changes what that version holds, so the
# index of an earlier run would hide new files (seen: "undefined" names of a
# file added since). goindex=0 reads the packages as they are.
export GODEBUG=goindex=0
export PATH="$tools:$PATH"

step "kubebuilder $(kubebuilder version 2>/dev/null | sed -n 's/.*KubeBuilderVersion:"\([^"]*\)".*/\1/p') init and create api"
kubebuilder init --domain example.com --repo example.com/widgets --skip-go-version-check > "$work/init.log" 2>&1 ||
  { tail -n 40 "$work/init.log" >&2; fail "kubebuilder init failed"; }
# The scaffold's Makefile installs controller-gen into bin/ unless
# bin/controller-gen-<its version> exists: give it the pinned one.
tools_version=$(sed -n 's/^CONTROLLER_TOOLS_VERSION ?= //p' Makefile)
[[ -n "$tools_version" ]] || fail "the scaffold's Makefile names no CONTROLLER_TOOLS_VERSION"
controller-gen --version | grep -qF " $tools_version" || fail "the scaffold uses controller-gen $tools_version, hack/kubebuilder pins $(controller-gen --version): pin the scaffold's version"
mkdir -p bin
cp "$tools/controller-gen" "bin/controller-gen-$tools_version"
ln -sf "controller-gen-$tools_version" bin/controller-gen
kubebuilder create api --group apps --version v1 --kind Widget --resource --controller > "$work/api.log" 2>&1 ||
  { tail -n 40 "$work/api.log" >&2; fail "kubebuilder create api failed"; }

step "go get github.com/kshard/kshard/controller/crshard@$version"
go get "github.com/kshard/kshard/controller/crshard@$version"

step "converting as docs/adapter.md says"
controller=internal/controller/widget_controller.go
grep -q 'ctrl.NewControllerManagedBy(mgr)' "$controller" || fail "$controller has no ctrl.NewControllerManagedBy(mgr): the scaffold changed"
sed -i 's|ctrl.NewControllerManagedBy(mgr)|crshard.ControllerManagedBy(mgr)|; s|^import (|import (\n\t"github.com/kshard/kshard/controller/crshard"|' "$controller"
grep -q 'mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{' cmd/main.go || fail "cmd/main.go has no ctrl.NewManager(ctrl.GetConfigOrDie(), …): the scaffold changed"
awk '
  /^import \(/ { print; print "\t\"github.com/kshard/kshard/controller/crshard\""; next }
  /mgr, err := ctrl.NewManager\(ctrl.GetConfigOrDie\(\), ctrl.Options\{/ {
    print "\tcfg := ctrl.GetConfigOrDie()"
    print "\tring, err := crshard.New(cfg, crshard.Options{Ring: \"widgets\"})"
    print "\tif err != nil {"
    print "\t\tsetupLog.Error(err, \"unable to build the kshard ring\")"
    print "\t\tos.Exit(1)"
    print "\t}"
    print "\tmgr, err := ring.NewManager(cfg, ctrl.Options{"
    next
  }
  { print }
' cmd/main.go > "$work/main.go" && mv "$work/main.go" cmd/main.go
gofmt -w cmd/main.go "$controller"

step "checking: no replace, no go.work, GOWORK=off go build, go mod tidy"
if grep -q '^replace\|^[[:space:]]*replace ' go.mod; then fail "go.mod has a replace directive"; fi
[[ ! -e go.work ]] || fail "the project has a go.work"
go build ./...
cp go.mod go.sum "$work/"
go mod tidy
diff -u "$work/go.mod" go.mod || fail "go mod tidy changed go.mod after the conversion"
go list -m github.com/kshard/kshard github.com/kshard/kshard/controller/crshard sigs.k8s.io/controller-runtime k8s.io/client-go

step "the Dockerfile's go steps, in a directory holding only what it copies"
docker_ctx="$work/docker"
mkdir -p "$docker_ctx"
while read -r src dst; do
  mkdir -p "$docker_ctx/$(dirname "$dst")"
  cp -r "$src" "$docker_ctx/$dst"
done < <(awk '$1 == "COPY" && $0 !~ /--from/ { print $2, $3 }' Dockerfile)
mapfile -t runs < <(awk '$1 == "RUN" { sub(/^RUN[[:space:]]+/, ""); print }' Dockerfile | grep -E '(^|[[:space:]])go[[:space:]]')
[[ ${#runs[@]} -gt 0 ]] || fail "the Dockerfile has no RUN go … step: the scaffold changed"
for run in "${runs[@]}"; do
  step "RUN $run"
  (cd "$docker_ctx" && TARGETOS=linux TARGETARCH=$(go env GOARCH) GOFLAGS=-mod=readonly bash -c "$run")
done
step "passed: a kubebuilder project converted to the adapter at $version builds from the proxy alone"
