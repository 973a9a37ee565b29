// Command kitcheck writes a file:// module proxy (GOPROXY=file://DIR)
// holding kshard's published modules, zipped from a checkout as the Go
// module proxy would serve them, so that a scratch module can depend on
// them only through the module cache: `make kit-check` uses it to prove
// that the test kit (manager/kshardtest) works for a user who only
// `go get`s kshard, and `make module-check` to prove the same of the
// controller-runtime adapter (controller/crshard).
//
// Usage: kitcheck -root CHECKOUT -proxy DIR -version VERSION [-nested DIR]...
//
// The root module and every -nested module (a directory relative to the
// checkout) are published at VERSION, as a release publishes them: a
// nested module's requirement of the root module is set to VERSION. A
// published go.mod with a replace directive is refused (a replace applies
// only in the main module, so its users would resolve the requirement it
// hides), and so is a nested module requiring the root at anything but a
// release version, or a go.work that resolves the root at another one.
package main

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

const rootModule = "github.com/kshard/kshard"

// dirs collects repeated -nested flags.
type dirs []string

func (d *dirs) String() string     { return strings.Join(*d, ",") }
func (d *dirs) Set(v string) error { *d = append(*d, v); return nil }

func main() {
	root := flag.String("root", "", "the kshard checkout to zip (required)")
	proxy := flag.String("proxy", "", "the proxy directory to write (required)")
	version := flag.String("version", "", "the version to publish at, e.g. v0.0.0-local.1 (required)")
	var nested dirs
	flag.Var(&nested, "nested", "a nested module to publish too, by its directory in the checkout (repeatable)")
	flag.Parse()
	if err := run(*root, *proxy, *version, nested); err != nil {
		fmt.Fprintln(os.Stderr, "kitcheck:", err)
		os.Exit(1)
	}
}

func run(root, proxy, version string, nested []string) error {
	if root == "" || proxy == "" || version == "" {
		return errors.New("-root, -proxy and -version are required")
	}
	if err := module.Check(rootModule, version); err != nil {
		return err
	}
	if _, err := readPublished(filepath.Join(root, "go.mod"), rootModule); err != nil {
		return err
	}
	if err := publish(proxy, root, rootModule, version); err != nil {
		return err
	}
	for _, dir := range nested {
		if err := publishNested(root, proxy, dir, version); err != nil {
			return err
		}
	}
	return nil
}

// readPublished reads a go.mod that is to be published, checking that it
// declares the module path want and has no replace directive.
func readPublished(path, want string) (*modfile.File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		return nil, err
	}
	if f.Module == nil || f.Module.Mod.Path != want {
		return nil, fmt.Errorf("%s does not declare module %s", path, want)
	}
	if len(f.Replace) > 0 {
		r := f.Replace[0]
		return nil, fmt.Errorf("%s replaces %s with %s: a published go.mod must not replace (the module's users do not see the replace and resolve the requirement as written); develop against the checkout through go.work instead",
			path, r.Old.Path, r.New.Path)
	}
	return f, nil
}

// publishNested publishes the module in root/dir at version, with its
// requirement of the root module set to version.
func publishNested(root, proxy, dir, version string) error {
	src := filepath.Join(root, dir)
	path := rootModule + "/" + filepath.ToSlash(filepath.Clean(dir))
	f, err := readPublished(filepath.Join(src, "go.mod"), path)
	if err != nil {
		return err
	}
	release := ""
	for _, r := range f.Require {
		if r.Mod.Path == rootModule {
			release = r.Mod.Version
		}
	}
	if release == "" {
		return fmt.Errorf("%s/go.mod does not require %s", dir, rootModule)
	}
	if !isRelease(release) {
		return fmt.Errorf("%s/go.mod requires %s %s, which is not a release version: the two modules are released together, so it requires the version both are tagged at (vX.Y.Z; hack/set-version.sh sets it)",
			dir, rootModule, release)
	}
	if err := checkWorkspace(root, release); err != nil {
		return err
	}
	if err := f.AddRequire(rootModule, version); err != nil {
		return err
	}
	f.Cleanup()
	gomod, err := f.Format()
	if err != nil {
		return err
	}
	// The zip must carry the go.mod the proxy serves, so it is made from a
	// copy holding the rewritten one.
	tmp, err := os.MkdirTemp("", "kitcheck-nested-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	copyDir := filepath.Join(tmp, "module")
	if err := os.CopyFS(copyDir, os.DirFS(src)); err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := os.WriteFile(filepath.Join(copyDir, "go.mod"), gomod, 0o644); err != nil {
		return err
	}
	return publish(proxy, copyDir, path, version)
}

// isRelease reports whether v is a release version: vX.Y.Z, neither a
// pre-release nor a pseudo-version.
func isRelease(v string) bool {
	return semver.IsValid(v) && semver.Canonical(v) == v && semver.Prerelease(v) == "" && !module.IsPseudoVersion(v)
}

// checkWorkspace checks that the checkout's go.work, which lets the nested
// modules build against the checkout before the release is tagged,
// resolves the root module at the release version they require: it
// replaces exactly that version, because a workspace still loads the
// go.mod of every required version of a workspace module.
func checkWorkspace(root, release string) error {
	path := filepath.Join(root, "go.work")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	w, err := modfile.ParseWork(path, data, nil)
	if err != nil {
		return err
	}
	for _, r := range w.Replace {
		if r.Old.Path == rootModule && r.Old.Version == release && filepath.Clean(r.New.Path) == "." {
			return nil
		}
	}
	return fmt.Errorf("go.work does not replace %s %s => ./ (the version the nested modules require): workspace builds would download that version instead of using the checkout; hack/set-version.sh %s sets both",
		rootModule, release, release)
}

// publish writes the module in dir into the proxy at version. The zip holds
// what `go mod download` would: no nested modules (for the root, the
// adapter and the tools module hack/tools among them), no VCS files,
// size-checked. A zip without a LICENSE at the module's root is refused:
// its users would get the code without a license, and pkg.go.dev shows no
// documentation for it.
func publish(proxy, dir, path, version string) error {
	mv := module.Version{Path: path, Version: version}
	if err := module.Check(mv.Path, mv.Version); err != nil {
		return err
	}
	escaped, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	at := filepath.Join(proxy, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		return err
	}
	if err := modzip.CreateFromDir(f, mv, dir); err != nil {
		f.Close()
		return fmt.Errorf("zipping %s: %w", dir, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := zipHasLicense(f.Name(), mv); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(at, version+".mod"), gomod, 0o644); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC()})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(at, version+".info"), info, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(at, "list"), []byte(version+"\n"), 0o644)
}

// zipHasLicense checks that the module zip at path holds a LICENSE at the
// module's root, the one file pkg.go.dev and license scanners read.
func zipHasLicense(path string, mv module.Version) error {
	r, err := zip.OpenReader(path)
	if err != nil {
		return err
	}
	defer r.Close()
	want := mv.Path + "@" + mv.Version + "/LICENSE"
	for _, f := range r.File {
		if f.Name == want {
			return nil
		}
	}
	return fmt.Errorf("the module zip of %s has no LICENSE at its root (%s): copy the root's LICENSE into the module's directory (make license-check)", mv.Path, want)
}
