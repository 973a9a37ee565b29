package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeFiles writes name → content under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A module of one published package, plus packages that are not published
// (internal, cmd, e2e, a main package): the record holds the published
// one's lines alone, and a change to it that is not recorded fails the
// check, naming each line added and removed.
func TestCheckFailsOnUnrecordedChange(t *testing.T) {
	t.Setenv("GOWORK", "off")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.24\n",
		"lib/lib.go": `package lib

import "time"

// Options configures a Thing.
type Options struct {
	Size    int
	Timeout time.Duration
	hidden  bool
}

type Thing struct{ o Options }

func New(o Options) (*Thing, error) { return &Thing{o: o}, nil }

func (t *Thing) Size() int     { return t.o.Size }
func (t *Thing) private() bool { return t.o.hidden }

type Getter interface {
	Get(key string) (string, bool)
}

type List[T any] []T

func (l List[T]) Len() int { return len(l) }

const DefaultSize = 3

var ErrClosed = errorString("closed")

type errorString string

func (e errorString) Error() string { return string(e) }

func helper() {}
`,
		"internal/x/x.go":  "package x\n\nfunc Hidden() {}\n",
		"cmd/tool/main.go": "package main\n\nfunc main() {}\n",
		"e2e/suite.go":     "package e2e\n\nfunc Run() {}\n",
	})
	cfg := config{root: dir, modules: []string{"."}, file: "api/m.txt"}
	ctx := context.Background()

	cfg.write = true
	var out bytes.Buffer
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("write: %v\n%s", err, &out)
	}
	record, err := os.ReadFile(filepath.Join(dir, "api", "m.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"pkg example.com/m/lib, const DefaultSize untyped int",
		"pkg example.com/m/lib, func New(Options) (*Thing, error)",
		"pkg example.com/m/lib, method (*Thing) Size() int",
		"pkg example.com/m/lib, method (List[T]) Len() int",
		"pkg example.com/m/lib, type Getter interface",
		"pkg example.com/m/lib, type Getter interface, Get(string) (string, bool)",
		"pkg example.com/m/lib, type List[T any] []T",
		"pkg example.com/m/lib, type Options struct",
		"pkg example.com/m/lib, type Options struct, Size int",
		"pkg example.com/m/lib, type Options struct, Timeout time.Duration",
		"pkg example.com/m/lib, type Thing struct",
		"pkg example.com/m/lib, var ErrClosed errorString",
	}
	if got := strings.Split(strings.TrimSpace(string(record)), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("record:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// 9 identifiers (const, func, 2 methods, 4 types, var); 3 fields and
	// interface methods.
	if !strings.Contains(out.String(), "example.com/m/lib") || !hasCountLine(out.String(), "total (1 packages)", "9", "3") {
		t.Errorf("counts:\n%s", &out)
	}

	cfg.write = false
	out.Reset()
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("check of an unchanged API: %v", err)
	}

	// An exported function added and a method renamed, not recorded.
	src := filepath.Join(dir, "lib", "lib.go")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(b), "func helper() {}", "func Helper() {}", 1)
	changed = strings.Replace(changed, ") Size() int", ") Len() int", 1)
	if err := os.WriteFile(src, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = run(ctx, cfg, &out)
	var d *diffError
	if !errors.As(err, &d) {
		t.Fatalf("check after an unrecorded change: err = %v, want a diffError", err)
	}
	wantAdded := []string{
		"pkg example.com/m/lib, func Helper()",
		"pkg example.com/m/lib, method (*Thing) Len() int",
	}
	wantRemoved := []string{"pkg example.com/m/lib, method (*Thing) Size() int"}
	if !reflect.DeepEqual(d.added, wantAdded) || !reflect.DeepEqual(d.removed, wantRemoved) {
		t.Errorf("added %q, removed %q; want %q, %q", d.added, d.removed, wantAdded, wantRemoved)
	}
	msg := err.Error()
	for _, s := range []string{"+ pkg example.com/m/lib, func Helper()", "- pkg example.com/m/lib, method (*Thing) Size() int", "make api"} {
		if !strings.Contains(msg, s) {
			t.Errorf("message lacks %q:\n%s", s, msg)
		}
	}
	t.Logf("the check's message:\n%s", msg)

	// Recorded, it passes again.
	cfg.write = true
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatal(err)
	}
	cfg.write = false
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("check after make api: %v", err)
	}
}

// hasCountLine says whether a line of out starts with label and has the
// given fields after it.
func hasCountLine(out, label string, fields ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, label); ok && reflect.DeepEqual(strings.Fields(rest), fields) {
			return true
		}
	}
	return false
}

func TestIsPublished(t *testing.T) {
	for _, c := range []struct {
		dir, path string
		want      bool
	}{
		{"shard/ring", "github.com/kshard/kshard/shard/ring", true},
		{"controller/crshard", "github.com/kshard/kshard/controller/crshard", true},
		{"internal/handoffsim", "github.com/kshard/kshard/internal/handoffsim", false},
		{"manager/internal/x", "github.com/kshard/kshard/manager/internal/x", false},
		{"e2e/chaos", "github.com/kshard/kshard/e2e/chaos", false},
		{"hack/docscheck/testdata/mod", "example.com/mod", false},
		{"cmd/kshard/status", "github.com/kshard/kshard/cmd/kshard/status", false},
		{"lib/testdata/x", "example.com/lib/testdata/x", false},
	} {
		if got := isPublished(c.dir, c.path); got != c.want {
			t.Errorf("isPublished(%q, %q) = %v, want %v", c.dir, c.path, got, c.want)
		}
	}
}

// The layering rules catch an adapter package importing the manager, a
// library package importing reflect and internal/cache's packages importing
// upward, the manager or the test fixtures, and leave an allowed exception,
// imports down internal/cache's layers and unrelated packages alone.
func TestCheckLayering(t *testing.T) {
	imports := map[string][]string{
		"github.com/kshard/kshard/controller/crshard":  {"github.com/kshard/kshard/manager/ringstatus", "github.com/kshard/kshard/shard/ring", "github.com/kshard/kshard/internal/handoff"},
		"github.com/kshard/kshard/shard/ring":          {"github.com/kshard/kshard/manager"},
		"github.com/kshard/kshard/shard/cache":         {"reflect"},
		"github.com/kshard/kshard/shard":               {"reflect", "sort"},
		"github.com/kshard/kshard/manager":             {"github.com/kshard/kshard/shard/cache"},
		"github.com/kshard/kshard/managerial/anything": {"github.com/kshard/kshard/manager"},
		// internal/cache: an import upward, one of the manager, one of
		// the test fixtures, and the allowed downward ones.
		"github.com/kshard/kshard/internal/cache/cachekit":   {"github.com/kshard/kshard/internal/cache/segmented"},
		"github.com/kshard/kshard/internal/cache/shardprobe": {"github.com/kshard/kshard/manager/kshardtest/controlplane"},
		"github.com/kshard/kshard/internal/cache/labelled":   {"github.com/kshard/kshard/internal/cache/segmented", "github.com/kshard/kshard/internal/cache/cachekit", "github.com/kshard/kshard/internal/cache/cachetest"},
		"github.com/kshard/kshard/internal/cache/segmented":  {"github.com/kshard/kshard/internal/cache/shardprobe", "github.com/kshard/kshard/shard/cache"},
	}
	got := checkLayering(imports, layering)
	want := []string{
		"github.com/kshard/kshard/controller/crshard imports github.com/kshard/kshard/internal/handoff: ",
		"github.com/kshard/kshard/controller/crshard imports github.com/kshard/kshard/manager/ringstatus: ",
		"github.com/kshard/kshard/internal/cache/cachekit imports github.com/kshard/kshard/internal/cache/segmented: ",
		"github.com/kshard/kshard/internal/cache/labelled imports github.com/kshard/kshard/internal/cache/cachetest: ",
		"github.com/kshard/kshard/internal/cache/segmented imports github.com/kshard/kshard/shard/cache: ",
		"github.com/kshard/kshard/internal/cache/shardprobe imports github.com/kshard/kshard/manager/kshardtest/controlplane: ",
		"github.com/kshard/kshard/shard imports reflect: ",
		"github.com/kshard/kshard/shard/ring imports github.com/kshard/kshard/manager: ",
	}
	if len(got) != len(want) {
		t.Fatalf("checkLayering = %q, want %d lines starting %q", got, len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("line %d = %q, want it to start %q", i, got[i], want[i])
		}
	}
	if !matches("a/b/...", "a/b") || !matches("a/b/...", "a/b/c") || matches("a/b/...", "a/bc") || matches("a/b", "a/b/c") {
		t.Error("matches: wrong tree semantics")
	}
}

// The layering rules read the imports of internal packages too, never of
// the e2e, hack and cmd trees or testdata.
func TestIsLibrary(t *testing.T) {
	for _, c := range []struct {
		dir, path string
		want      bool
	}{
		{"shard/ring", "github.com/kshard/kshard/shard/ring", true},
		{"internal/cache/labelled", "github.com/kshard/kshard/internal/cache/labelled", true},
		{"e2e/harness", "github.com/kshard/kshard/e2e/harness", false},
		{"cmd/kshard/internal/cli", "github.com/kshard/kshard/cmd/kshard/internal/cli", false},
		{"lib/testdata/x", "example.com/lib/testdata/x", false},
	} {
		if got := isLibrary(c.dir, c.path); got != c.want {
			t.Errorf("isLibrary(%q, %q) = %v, want %v", c.dir, c.path, got, c.want)
		}
	}
}
