// Command kitcheck writes a file:// module proxy (GOPROXY=file://DIR)
// holding kshard, zipped from a checkout as the Go module proxy would serve
// it, so that a scratch module can depend on kshard only through the module
// cache: `make kit-check` uses it to prove that the test kit
// (manager/kshardtest) works for a user who only `go get`s kshard.
//
// Usage: kitcheck -root CHECKOUT -proxy DIR -version VERSION
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

const modulePath = "github.com/kshard/kshard"

func main() {
	root := flag.String("root", "", "the kshard checkout to zip (required)")
	proxy := flag.String("proxy", "", "the proxy directory to write (required)")
	version := flag.String("version", "", "the version to publish it as, e.g. v0.0.0-local.1 (required)")
	flag.Parse()
	if err := run(*root, *proxy, *version); err != nil {
		fmt.Fprintln(os.Stderr, "kitcheck:", err)
		os.Exit(1)
	}
}

func run(root, proxy, version string) error {
	if root == "" || proxy == "" || version == "" {
		return errors.New("-root, -proxy and -version are required")
	}
	mv := module.Version{Path: modulePath, Version: version}
	if err := module.Check(mv.Path, mv.Version); err != nil {
		return err
	}
	dir := filepath.Join(proxy, modulePath, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The zip holds what `go mod download` would: no nested modules (the
	// tools module hack/tools among them), no VCS files, size-checked.
	f, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		return err
	}
	if err := zip.CreateFromDir(f, mv, root); err != nil {
		f.Close()
		return fmt.Errorf("zipping %s: %w", root, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, version+".mod"), gomod, 0o644); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC()})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, version+".info"), info, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "list"), []byte(version+"\n"), 0o644)
}
