package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// checkout writes a minimal checkout: the root module's go.mod, the
// adapter's, and the go.work if work is not empty.
func checkout(t *testing.T, rootMod, crshardMod, work string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":                     rootMod,
		"doc.go":                     "package kshard\n",
		"controller/crshard/go.mod":  crshardMod,
		"controller/crshard/doc.go":  "package crshard\n",
		"LICENSE":                    "Apache License\n",
		"controller/crshard/LICENSE": "Apache License\n",
	}
	if work != "" {
		files["go.work"] = work
	}
	for name, data := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const (
	rootMod = "module github.com/kshard/kshard\n\ngo 1.26.0\n"
	work    = "go 1.26.0\n\nuse (\n\t.\n\t./controller/crshard\n)\n\nreplace github.com/kshard/kshard v0.1.0 => ./\n"
)

func crshardMod(version, extra string) string {
	return "module github.com/kshard/kshard/controller/crshard\n\ngo 1.26.0\n\nrequire github.com/kshard/kshard " + version + "\n" + extra
}

func TestPublishesBothAtOneVersion(t *testing.T) {
	root := checkout(t, rootMod, crshardMod("v0.1.0", ""), work)
	proxy := t.TempDir()
	const v = "v0.0.0-local.1"
	if err := run(root, proxy, v, []string{"controller/crshard"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(proxy, "github.com/kshard/kshard/controller/crshard/@v", v+".mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Require) != 1 || f.Require[0].Mod.Version != v {
		t.Fatalf("the published adapter's go.mod should require kshard at %s, got:\n%s", v, data)
	}
	for _, name := range []string{"github.com/kshard/kshard/@v/" + v + ".zip", "github.com/kshard/kshard/controller/crshard/@v/" + v + ".zip"} {
		if _, err := os.Stat(filepath.Join(proxy, name)); err != nil {
			t.Errorf("want %s in the proxy: %v", name, err)
		}
	}
}

func TestRefusesWhatUsersCannotResolve(t *testing.T) {
	for _, tc := range []struct {
		name             string
		root, crshard, w string
		want             string
	}{
		{"replace in the root", rootMod + "replace k8s.io/api => ../api\n", crshardMod("v0.1.0", ""), work, "must not replace"},
		{"replace in the adapter", rootMod, crshardMod("v0.1.0", "replace github.com/kshard/kshard => ../..\n"), work, "must not replace"},
		{"zero pseudo-version", rootMod, crshardMod("v0.0.0-00010101000000-000000000000", ""), work, "not a release version"},
		{"pre-release", rootMod, crshardMod("v0.1.0-rc.1", ""), work, "not a release version"},
		{"go.work resolves another version", rootMod, crshardMod("v0.2.0", ""), work, "go.work does not replace github.com/kshard/kshard v0.2.0"},
		{"no requirement of the root", rootMod, "module github.com/kshard/kshard/controller/crshard\n\ngo 1.26.0\n", work, "does not require"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := checkout(t, tc.root, tc.crshard, tc.w)
			err := run(root, t.TempDir(), "v0.0.0-local.1", []string{"controller/crshard"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error saying %q, got %v", tc.want, err)
			}
		})
	}
}

// A published module whose zip would carry no LICENSE is refused, naming
// the module.
func TestRefusesAModuleWithoutLicense(t *testing.T) {
	root := checkout(t, rootMod, crshardMod("v0.1.0", ""), work)
	if err := os.Remove(filepath.Join(root, "controller/crshard/LICENSE")); err != nil {
		t.Fatal(err)
	}
	err := run(root, t.TempDir(), "v0.0.0-local.1", []string{"controller/crshard"})
	if err == nil || !strings.Contains(err.Error(), "github.com/kshard/kshard/controller/crshard has no LICENSE") {
		t.Fatalf("want an error naming the adapter's missing LICENSE, got %v", err)
	}
	// The root's own LICENSE does not count for the adapter: it is not in
	// the adapter's zip. Without the root's, the root is refused first.
	root = checkout(t, rootMod, crshardMod("v0.1.0", ""), work)
	if err := os.Remove(filepath.Join(root, "LICENSE")); err != nil {
		t.Fatal(err)
	}
	err = run(root, t.TempDir(), "v0.0.0-local.1", []string{"controller/crshard"})
	if err == nil || !strings.Contains(err.Error(), "github.com/kshard/kshard has no LICENSE") {
		t.Fatalf("want an error naming the root's missing LICENSE, got %v", err)
	}
}
