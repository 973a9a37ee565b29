// Package kittools finds, or builds and caches, the control-plane binaries
// (kube-apiserver, etcd, kube-controller-manager) that the test kit's
// control plane (manager/kshardtest/controlplane), `kshard demo` and
// hack/ensure-controlplane run.
//
// The binaries come from $KSHARD_BIN_DIR when it is set. Otherwise they are
// built from source with the pinned tools module (k8s.io/kubernetes and
// go.etcd.io/etcd/server/v3): this package carries copies of hack/tools'
// go.mod and go.sum (tools.mod, tools.sum; $KSHARD_TOOLS_DIR names another
// tools module) and writes them out next to the cache, so the build works
// for a user who has kshard only in the module cache. Builds are cached per
// pin under $KSHARD_CACHE_DIR, $XDG_CACHE_HOME/kshard or ~/.cache/kshard
// (the entry's name hashes the module's bytes, so hack/tools and the carried
// copy share it), so only the first use pays the build (minutes). It needs
// only the standard library.
package kittools

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Environment variables that steer where binaries come from (docs/testing.md
// documents them for users of the test kit).
const (
	// EnvBinDir names a directory holding prebuilt kube-apiserver, etcd and
	// kube-controller-manager binaries; when set, nothing is built.
	EnvBinDir = "KSHARD_BIN_DIR"
	// envCacheDir overrides the cache root (default $XDG_CACHE_HOME/kshard or
	// ~/.cache/kshard).
	envCacheDir = "KSHARD_CACHE_DIR"
	// EnvToolsDir names a tools module directory (like kshard's hack/tools)
	// to build from instead of the module this package carries; for trying
	// other pins.
	EnvToolsDir = "KSHARD_TOOLS_DIR"
)

// Binary names inside a binaries directory.
const (
	binAPIServer         = "kube-apiserver"
	binEtcd              = "etcd"
	binControllerManager = "kube-controller-manager"
)

// Binaries are the paths of the control-plane executables, all in one
// directory.
type Binaries struct {
	APIServer         string
	Etcd              string
	ControllerManager string
	// KubernetesVersion is the k8s.io/kubernetes version they were built
	// from; empty when unknown (see ResolveVersion).
	KubernetesVersion string
}

// Dir is the directory holding the binaries, what $KSHARD_BIN_DIR or
// controlplane.Options.BinDir names.
func (b Binaries) Dir() string { return filepath.Dir(b.APIServer) }

// manifest records what a cached build contains, so a truncated or replaced
// binary is detected and rebuilt instead of failing obscurely at start.
type manifest struct {
	KubernetesVersion string            `json:"kubernetesVersion"`
	SHA256            map[string]string `json:"sha256"`
}

// toolsPackages are the main packages built from the tools module, in the
// order go build receives them; etcd's main package is the module root.
var toolsPackages = map[string]string{
	binAPIServer:         "k8s.io/kubernetes/cmd/kube-apiserver",
	binControllerManager: "k8s.io/kubernetes/cmd/kube-controller-manager",
	binEtcd:              "go.etcd.io/etcd/server/v3",
}

// Ensure returns usable control-plane binaries: those in $KSHARD_BIN_DIR
// when it is set, else the cached build of the tools module, building it
// into the cache when it is missing or fails verification. Progress is
// written to progress (may be nil). Concurrent callers, in this or other
// processes, build at most once: the cache is guarded by a file lock.
func Ensure(ctx context.Context, progress io.Writer) (Binaries, error) {
	if progress == nil {
		progress = io.Discard
	}
	if dir := os.Getenv(EnvBinDir); dir != "" {
		b, err := In(dir)
		if err != nil {
			return Binaries{}, fmt.Errorf("%s=%s: %w (unset it to build from source)", EnvBinDir, dir, err)
		}
		return b, nil
	}
	tools, err := loadTools()
	if err != nil {
		return Binaries{}, err
	}
	version, key, err := toolsVersion(tools)
	if err != nil {
		return Binaries{}, err
	}
	root, err := cacheDir()
	if err != nil {
		return Binaries{}, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("creating binary cache %s: %w (set %s to a writable directory)", root, err, envCacheDir)
	}
	// One lock per cache entry: a build of one pin (make compat's extra
	// versions take 10-20 minutes each) must not hold up tests that only
	// read another, already built entry.
	name := "kubernetes-" + version + "-" + key
	unlock, err := lockFile(ctx, filepath.Join(root, name+".lock"), progress)
	if err != nil {
		return Binaries{}, err
	}
	defer unlock()

	dir := filepath.Join(root, name)
	if err := verifyCached(dir); err == nil {
		return binariesIn(dir, version), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(progress, "kshard: cached control-plane binaries in %s are unusable (%v); rebuilding\n", dir, err)
	}
	toolsDir := tools.dir
	if toolsDir == "" {
		// Write the carried tools module next to the cache entry, so a user
		// who only has kshard in the module cache can build too.
		toolsDir = filepath.Join(root, "tools-"+key)
		if err := tools.write(toolsDir); err != nil {
			return Binaries{}, err
		}
	}
	if err := build(ctx, toolsDir, dir, version, progress); err != nil {
		return Binaries{}, err
	}
	return binariesIn(dir, version), nil
}

// In returns the binaries in dir (a cache entry, or a directory of
// prebuilt ones), with the version its manifest.json records (empty
// without one), once each of them is an executable file.
func In(dir string) (Binaries, error) {
	b := binariesIn(dir, manifestVersion(dir))
	for _, p := range []string{b.APIServer, b.Etcd, b.ControllerManager} {
		if err := checkExecutable(p); err != nil {
			return Binaries{}, err
		}
	}
	return b, nil
}

func binariesIn(dir, version string) Binaries {
	return Binaries{
		APIServer:         filepath.Join(dir, binAPIServer),
		Etcd:              filepath.Join(dir, binEtcd),
		ControllerManager: filepath.Join(dir, binControllerManager),
		KubernetesVersion: version,
	}
}

// cacheDir is the root of kshard's binary cache.
func cacheDir() (string, error) {
	if d := os.Getenv(envCacheDir); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "kshard"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding a cache directory: %w (set %s)", err, envCacheDir)
	}
	return filepath.Join(home, ".cache", "kshard"), nil
}

// buildRecipe names how build compiles the binaries; it is part of the
// cache key, so changing the recipe (flags, stamped version) rebuilds.
const buildRecipe = "go build -ldflags version-stamped v2"

// versionLDFlags stamps version into the binaries as release builds do, so
// that /version and `kubectl version` report it instead of v0.0.0-master.
func versionLDFlags(version string) string {
	major, minor := "", ""
	if parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3); len(parts) >= 2 {
		major, minor = parts[0], parts[1]
	}
	const pkg = "k8s.io/component-base/version"
	return strings.Join([]string{
		"-X", pkg + ".gitVersion=" + version,
		"-X", pkg + ".gitMajor=" + major,
		"-X", pkg + ".gitMinor=" + minor,
		"-X", pkg + ".gitTreeState=clean",
	}, " ")
}

var kubernetesRequire = regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes\s+(v\S+)`)

// toolsVersion reads the pinned Kubernetes version from the tools go.mod and a
// short key over go.mod and go.sum, so any change of pins gets a new cache
// entry rather than reusing binaries built from other sources. The key of the
// carried module equals that of hack/tools, whose bytes it copies.
func toolsVersion(tools toolsModule) (version, key string, err error) {
	m := kubernetesRequire.FindSubmatch(tools.mod)
	if m == nil {
		return "", "", fmt.Errorf("the tools module's go.mod (%s) does not require k8s.io/kubernetes; run hack/tools/pin.sh VERSION", tools.source)
	}
	h := sha256.New()
	h.Write(tools.mod)
	h.Write(tools.sum)
	h.Write([]byte(buildRecipe))
	return string(m[1]), hex.EncodeToString(h.Sum(nil))[:12], nil
}

func verifyCached(dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return err
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	for name := range toolsPackages {
		want := m.SHA256[name]
		got, err := fileSHA256(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("%s: %w", name, errors.Unwrap(err))
		}
		if want == "" || got != want {
			return fmt.Errorf("%s: checksum mismatch", name)
		}
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func checkExecutable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}

// build compiles the binaries into a fresh directory next to dir and renames
// it into place, so an interrupted build never leaves a half-written cache.
func build(ctx context.Context, toolsDir, dir, version string, progress io.Writer) error {
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	fmt.Fprintf(progress, "kshard: building kube-apiserver, kube-controller-manager and etcd %s from source into %s (first time only; about 9 min on a quiet 2-core machine)\n", version, dir)

	pkgs := []string{toolsPackages[binAPIServer], toolsPackages[binControllerManager], toolsPackages[binEtcd]}
	args := append([]string{"build", "-v", "-ldflags", versionLDFlags(version), "-o", tmp + string(os.PathSeparator)}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = toolsDir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting go build (is the go toolchain on PATH?): %w", err)
	}
	// go build -v names each package as it compiles; count them for progress
	// and keep the tail for the error message.
	var compiled atomic.Int64
	tail := newTailBuffer(40)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			compiled.Add(1)
			tail.add(sc.Text())
		}
	}()
	ticker := time.NewTicker(15 * time.Second)
	defer ticker.Stop()
	waitErr := make(chan error, 1)
	go func() { <-done; waitErr <- cmd.Wait() }()
	for {
		select {
		case <-ticker.C:
			fmt.Fprintf(progress, "kshard: still building control plane: %d packages compiled, %s elapsed\n", compiled.Load(), time.Since(start).Round(time.Second))
			continue
		case err = <-waitErr:
		}
		break
	}
	if err != nil {
		return fmt.Errorf("building control-plane binaries in %s failed: %w\n%s", toolsDir, err, tail.String())
	}
	// etcd's main package is its module root, so go build names it "server".
	if err := os.Rename(filepath.Join(tmp, "server"), filepath.Join(tmp, binEtcd)); err != nil {
		return fmt.Errorf("naming etcd binary: %w", err)
	}
	m := manifest{KubernetesVersion: version, SHA256: map[string]string{}}
	for name := range toolsPackages {
		sum, err := fileSHA256(filepath.Join(tmp, name))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		m.SHA256[name] = sum
	}
	raw, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "manifest.json"), raw, 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	fmt.Fprintf(progress, "kshard: control-plane binaries built in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// lockFile takes an exclusive flock, telling the user when it has to wait for
// another build.
func lockFile(ctx context.Context, path string, progress io.Writer) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", path, err)
	}
	told := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !told {
			fmt.Fprintf(progress, "kshard: waiting for another process building control-plane binaries (%s)\n", path)
			told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tailBuffer keeps the last n lines written to it.
type tailBuffer struct {
	n     int
	lines []string
}

func newTailBuffer(n int) *tailBuffer { return &tailBuffer{n: n} }

func (t *tailBuffer) add(line string) {
	t.lines = append(t.lines, line)
	if len(t.lines) > t.n {
		t.lines = t.lines[len(t.lines)-t.n:]
	}
}

func (t *tailBuffer) String() string { return strings.Join(t.lines, "\n") }
