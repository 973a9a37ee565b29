// Command apicheck records kshard's exported API and fails when it changes
// unrecorded. `make api-check` (part of `make test`) runs it; `make api`
// (apicheck -write) rewrites the record after an intended change.
//
// The API is every exported identifier of the published packages of the
// modules named by -modules (the root and controller/crshard): each
// non-main package with no internal or testdata path element, outside the
// root module's e2e/, hack/ and cmd/ trees. Its record, api/kshard.txt,
// holds one sorted line per identifier in the style of the Go project's
// api/*.txt files:
//
//	pkg github.com/kshard/kshard/shard, func NewRing(Options) (*Ring, error)
//	pkg github.com/kshard/kshard/shard, method (*Ring) Owner(int) (string, bool)
//	pkg github.com/kshard/kshard/shard, type Options struct
//	pkg github.com/kshard/kshard/shard, type Options struct, Partitions int
//
// Identifiers (what issue 43 counts) are top-level functions, types,
// constants and variables, and the methods declared on exported types.
// Fields of exported structs and methods of exported interfaces
// (`type T struct, F` and `type T interface, M` lines; `embedded X` for an
// embedded one) are recorded too, and counted apart. The counts are printed
// per package and in total.
//
// The types come from the export data go list -export leaves in the build
// cache, as the compiler sees them.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
)

func main() {
	root := flag.String("root", ".", "the repository's root: the first module's directory, the others relative to it")
	modules := flag.String("modules", ".,controller/crshard", "comma-separated directories of the published modules, relative to -root")
	file := flag.String("file", "api/kshard.txt", "the API record, relative to -root")
	write := flag.Bool("write", false, "rewrite the record instead of comparing against it")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, config{
		root:    *root,
		modules: strings.Split(*modules, ","),
		file:    *file,
		write:   *write,
	}, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "apicheck: %v\n", err)
		var d *diffError
		var l *layeringError
		if errors.As(err, &d) || errors.As(err, &l) {
			os.Exit(1)
		}
		os.Exit(2)
	}
}

type config struct {
	root    string
	modules []string // directories relative to root; "." is the root module
	file    string   // relative to root
	write   bool
}

// A diffError says the API differs from its record; the process exits 1
// for it, 2 for a failure to compute the API.
type diffError struct {
	file           string
	added, removed []string
}

func (d *diffError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the exported API differs from %s (%d added, %d removed):\n", d.file, len(d.added), len(d.removed))
	for _, l := range d.removed {
		fmt.Fprintf(&b, "  - %s\n", l)
	}
	for _, l := range d.added {
		fmt.Fprintf(&b, "  + %s\n", l)
	}
	b.WriteString("A published name is a promise to users: unexport what they need not call. If the change is intended, run `make api` and commit " + d.file + ".")
	return b.String()
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	root, err := filepath.Abs(cfg.root)
	if err != nil {
		return err
	}
	pkgs, imports, err := published(ctx, root, cfg.modules)
	if err != nil {
		return err
	}
	if broken := checkLayering(imports, layering); len(broken) > 0 {
		return &layeringError{broken: broken}
	}
	var lines []string
	var stats []pkgStats
	total := pkgStats{path: "total"}
	for _, pkg := range pkgs {
		ls, s := describe(pkg)
		lines = append(lines, ls...)
		stats = append(stats, s)
		total.idents += s.idents
		total.fields += s.fields
	}
	sort.Strings(lines)
	lines = dedupe(lines)

	fmt.Fprintf(out, "%-60s %11s %6s\n", "package", "identifiers", "fields")
	for _, s := range stats {
		fmt.Fprintf(out, "%-60s %11d %6d\n", s.path, s.idents, s.fields)
	}
	fmt.Fprintf(out, "%-60s %11d %6d\n", fmt.Sprintf("total (%d packages)", len(stats)), total.idents, total.fields)

	recordPath := filepath.Join(root, filepath.FromSlash(cfg.file))
	if cfg.write {
		if err := os.MkdirAll(filepath.Dir(recordPath), 0o755); err != nil {
			return err
		}
		var b bytes.Buffer
		for _, l := range lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
		if err := os.WriteFile(recordPath, b.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(out, "apicheck: wrote %d lines to %s\n", len(lines), cfg.file)
		return nil
	}
	recorded, err := readRecord(recordPath)
	if err != nil {
		return fmt.Errorf("reading the API record: %w (run `make api` to write it)", err)
	}
	added, removed := diff(recorded, lines)
	if len(added) > 0 || len(removed) > 0 {
		return &diffError{file: cfg.file, added: added, removed: removed}
	}
	fmt.Fprintf(out, "apicheck: the exported API matches %s (%d lines)\n", cfg.file, len(lines))
	return nil
}

type pkgStats struct {
	path           string
	idents, fields int
}

type listedPackage struct {
	ImportPath string
	Name       string
	Dir        string
	Export     string
	DepOnly    bool
	Module     *struct{ Path, Dir string }
	Imports    []string
	Error      *struct{ Err string }
}

// published lists the published packages of the modules and reads their
// types from export data.
func published(ctx context.Context, root string, modules []string) ([]*types.Package, map[string][]string, error) {
	args := []string{"list", "-e", "-deps", "-export", "-json=ImportPath,Name,Dir,Export,DepOnly,Module,Imports,Error"}
	for _, m := range modules {
		args = append(args, "./"+path.Join(filepath.ToSlash(strings.TrimSpace(m)), "..."))
	}
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	export := map[string]string{}
	imports := map[string][]string{} // of the library packages, for the layering rules
	var selected []string
	dec := json.NewDecoder(bytes.NewReader(outb))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			return nil, nil, fmt.Errorf("reading go list's output: %w", err)
		}
		if p.Error != nil {
			return nil, nil, fmt.Errorf("go list: package %s: %s (fix the build first: the API is read from it)", p.ImportPath, p.Error.Err)
		}
		export[p.ImportPath] = p.Export
		if p.DepOnly || p.Module == nil || p.Name == "main" {
			continue
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			return nil, nil, err
		}
		if isPublished(filepath.ToSlash(rel), p.ImportPath) {
			selected = append(selected, p.ImportPath)
		}
		if isLibrary(filepath.ToSlash(rel), p.ImportPath) {
			imports[p.ImportPath] = p.Imports
		}
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(p string) (io.ReadCloser, error) {
		f, ok := export[p]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", p)
		}
		return os.Open(f)
	})
	sort.Strings(selected)
	var pkgs []*types.Package
	for _, p := range selected {
		pkg, err := imp.Import(p)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the export data of %s: %w", p, err)
		}
		pkgs = append(pkgs, pkg)
	}
	if len(pkgs) == 0 {
		return nil, nil, fmt.Errorf("no published package in %s", strings.Join(modules, ", "))
	}
	return pkgs, imports, nil
}

// isPublished says whether the package in dir (relative to the root, in
// slash form) is published: outside the root module's e2e/, hack/ and
// cmd/ trees, with no internal or testdata element in its import path.
func isPublished(dir, importPath string) bool {
	first, _, _ := strings.Cut(dir, "/")
	switch first {
	case "e2e", "hack", "cmd", "..":
		return false
	}
	for _, e := range strings.Split(importPath, "/") {
		if e == "internal" || e == "testdata" {
			return false
		}
	}
	return true
}

// isLibrary says whether the package in dir is library code, whose imports
// the layering rules check: a published package, or an internal one
// outside the root module's e2e/, hack/ and cmd/ trees.
func isLibrary(dir, importPath string) bool {
	first, _, _ := strings.Cut(dir, "/")
	switch first {
	case "e2e", "hack", "cmd", "..":
		return false
	}
	return !slices.Contains(strings.Split(importPath, "/"), "testdata")
}

// describe returns the record's lines for pkg and its counts.
func describe(pkg *types.Package) ([]string, pkgStats) {
	s := pkgStats{path: pkg.Path()}
	prefix := "pkg " + pkg.Path() + ", "
	qual := func(other *types.Package) string {
		if other == pkg {
			return ""
		}
		return other.Name()
	}
	var lines []string
	ident := func(l string) {
		lines = append(lines, prefix+l)
		s.idents++
	}
	field := func(l string) {
		lines = append(lines, prefix+l)
		s.fields++
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Func:
			ident("func " + name + signature(obj.Type().(*types.Signature), qual))
		case *types.Const:
			ident("const " + name + " " + types.TypeString(obj.Type(), qual))
		case *types.Var:
			ident("var " + name + " " + types.TypeString(obj.Type(), qual))
		case *types.TypeName:
			describeType(obj, qual, ident, field)
		}
	}
	return lines, s
}

func describeType(obj *types.TypeName, qual types.Qualifier, ident, field func(string)) {
	name := obj.Name()
	if obj.IsAlias() {
		ident("type " + name + typeParams(obj.Type(), qual) + " = " + types.TypeString(types.Unalias(obj.Type()), qual))
		return
	}
	named, ok := obj.Type().(*types.Named)
	if !ok {
		ident("type " + name + " " + types.TypeString(obj.Type(), qual))
		return
	}
	head := "type " + name + typeParams(named, qual)
	switch u := named.Underlying().(type) {
	case *types.Struct:
		ident(head + " struct")
		for f := range u.Fields() {
			if !f.Exported() {
				continue
			}
			if f.Embedded() {
				field(head + " struct, embedded " + types.TypeString(f.Type(), qual))
			} else {
				field(head + " struct, " + f.Name() + " " + types.TypeString(f.Type(), qual))
			}
		}
	case *types.Interface:
		ident(head + " interface")
		for e := range u.EmbeddedTypes() {
			field(head + " interface, embedded " + types.TypeString(e, qual))
		}
		for m := range u.ExplicitMethods() {
			if m.Exported() {
				field(head + " interface, " + m.Name() + signature(m.Type().(*types.Signature), qual))
			}
		}
	default:
		ident(head + " " + types.TypeString(u, qual))
	}
	for m := range named.Methods() {
		if !m.Exported() {
			continue
		}
		sig := m.Type().(*types.Signature)
		recv := name
		if tp := named.TypeParams(); tp.Len() > 0 {
			var ps []string
			for p := range tp.TypeParams() {
				ps = append(ps, p.Obj().Name())
			}
			recv += "[" + strings.Join(ps, ", ") + "]"
		}
		if _, ptr := sig.Recv().Type().(*types.Pointer); ptr {
			recv = "*" + recv
		}
		ident("method (" + recv + ") " + m.Name() + signature(sig, qual))
	}
}

// signature writes a function's type parameters, parameter types and
// result types, without the func keyword, the receiver or the names
// (renaming a parameter changes no caller), as Go's api files do.
func signature(sig *types.Signature, qual types.Qualifier) string {
	var b strings.Builder
	b.WriteString(typeParamList(sig.TypeParams(), qual))
	b.WriteByte('(')
	params := sig.Params()
	for i := 0; i < params.Len(); i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		t := params.At(i).Type()
		if sig.Variadic() && i == params.Len()-1 {
			b.WriteString("..." + types.TypeString(t.(*types.Slice).Elem(), qual))
		} else {
			b.WriteString(types.TypeString(t, qual))
		}
	}
	b.WriteByte(')')
	results := sig.Results()
	switch results.Len() {
	case 0:
	case 1:
		b.WriteString(" " + types.TypeString(results.At(0).Type(), qual))
	default:
		var rs []string
		for i := 0; i < results.Len(); i++ {
			rs = append(rs, types.TypeString(results.At(i).Type(), qual))
		}
		b.WriteString(" (" + strings.Join(rs, ", ") + ")")
	}
	return b.String()
}

func typeParams(t types.Type, qual types.Qualifier) string {
	switch t := t.(type) {
	case *types.Named:
		return typeParamList(t.TypeParams(), qual)
	case *types.Alias:
		return typeParamList(t.TypeParams(), qual)
	}
	return ""
}

func typeParamList(tp *types.TypeParamList, qual types.Qualifier) string {
	if tp == nil || tp.Len() == 0 {
		return ""
	}
	var ps []string
	for p := range tp.TypeParams() {
		ps = append(ps, p.Obj().Name()+" "+types.TypeString(p.Constraint(), qual))
	}
	return "[" + strings.Join(ps, ", ") + "]"
}

func dedupe(sorted []string) []string {
	out := sorted[:0]
	for i, l := range sorted {
		if i == 0 || l != sorted[i-1] {
			out = append(out, l)
		}
	}
	return out
}

// readRecord reads the record's lines, skipping blank ones.
func readRecord(file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, sc.Err()
}

// diff returns the lines of now not in recorded and those of recorded not
// in now, each sorted.
func diff(recorded, now []string) (added, removed []string) {
	in := func(ls []string) map[string]bool {
		m := make(map[string]bool, len(ls))
		for _, l := range ls {
			m[l] = true
		}
		return m
	}
	rec, cur := in(recorded), in(now)
	for _, l := range now {
		if !rec[l] {
			added = append(added, l)
		}
	}
	for _, l := range recorded {
		if !cur[l] {
			removed = append(removed, l)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	return added, removed
}

func goTool() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}
