package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// An index is what the docs' Go references resolve against: the type
// information of every package of the workspace's modules and of the
// packages they import directly, read from the export data go list -export
// leaves in the build cache (the same files go build and go vet use, so a
// warm cache makes this take seconds), and the test functions of every
// _test.go file, which export data does not carry.
type index struct {
	root string
	imp  types.ImporterFrom

	mu     sync.Mutex        // guards export, for lookups of packages outside the first list
	export map[string]string // import path → export data file

	repo     []*types.Package            // the workspace's packages
	direct   []*types.Package            // repo and the packages they import
	byName   map[string][]*types.Package // repo packages by name
	repoPath map[*types.Package]string   // repo package → its directory relative to root
	// quals maps an import name as the repository's Go files write it
	// (corev1, ctrl, xxhash, manager) to the import paths it stands for, the
	// most used first: how a doc's `ctrl.NewManager` or a Go block's corev1
	// finds its package.
	quals     map[string][]string
	types     map[string][]*types.TypeName // named types of the direct packages by name
	topNames  map[string]bool              // top-level names of the direct packages
	members   map[string]bool              // field and method names of their types
	testFuncs map[string]bool              // Test…, Benchmark…, Example…, Fuzz… functions
	// alerts are the alert names of the Prometheus rules file
	// (alertRules), which the docs name like Go identifiers.
	alerts map[string]bool
}

// alertRules is the rules file whose alert names the docs may name.
const alertRules = "deploy/monitoring/kshard-alerts.rules.yaml"

var alertLine = regexp.MustCompile(`(?m)^\s*-\s*alert:\s*([A-Za-z0-9_]+)\s*$`)

// loadAlerts reads the alert names of root's alertRules; none when the
// file does not exist.
func loadAlerts(root string) (map[string]bool, error) {
	b, err := os.ReadFile(filepath.Join(root, alertRules))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, m := range alertLine.FindAllSubmatch(b, -1) {
		names[string(m[1])] = true
	}
	return names, nil
}

type listedPackage struct {
	ImportPath string
	Name       string
	Dir        string
	Export     string
	Imports    []string
	DepOnly    bool
	Standard   bool
	Module     *struct{ Main bool }
	Error      *struct{ Err string }
}

// loadIndex lists the packages of every module of the workspace at root
// (go.work's use directives; the root module alone without a go.work) with
// go list -deps -export and reads their export data.
func loadIndex(ctx context.Context, root string) (*index, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	patterns, err := workspacePatterns(ctx, root)
	if err != nil {
		return nil, err
	}
	args := append([]string{"list", "-e", "-deps", "-export", "-json=ImportPath,Name,Dir,Export,Imports,DepOnly,Standard,Module,Error"}, patterns...)
	out, err := goCmd(ctx, root, args...)
	if err != nil {
		return nil, err
	}
	idx := &index{
		root:      root,
		export:    map[string]string{},
		byName:    map[string][]*types.Package{},
		repoPath:  map[*types.Package]string{},
		quals:     map[string][]string{},
		types:     map[string][]*types.TypeName{},
		topNames:  map[string]bool{},
		members:   map[string]bool{},
		testFuncs: map[string]bool{},
	}
	if idx.alerts, err = loadAlerts(root); err != nil {
		return nil, err
	}
	var listed []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("reading go list's output: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list: package %s: %s (fix the build first: the docs are checked against it)", p.ImportPath, p.Error.Err)
		}
		idx.export[p.ImportPath] = p.Export
		listed = append(listed, p)
	}
	idx.imp = importer.ForCompiler(token.NewFileSet(), "gc", idx.lookup).(types.ImporterFrom)

	directPaths := map[string]bool{}
	for _, p := range listed {
		if p.DepOnly || p.Module == nil || !p.Module.Main {
			continue
		}
		pkg, err := idx.imp.Import(p.ImportPath)
		if err != nil {
			return nil, fmt.Errorf("reading the export data of %s: %w", p.ImportPath, err)
		}
		rel, _ := filepath.Rel(root, p.Dir)
		idx.repo = append(idx.repo, pkg)
		idx.repoPath[pkg] = filepath.ToSlash(rel)
		idx.byName[pkg.Name()] = append(idx.byName[pkg.Name()], pkg)
		directPaths[p.ImportPath] = true
		for _, imp := range p.Imports {
			directPaths[imp] = true
		}
	}
	for p := range directPaths {
		if p == "C" || p == "unsafe" {
			continue
		}
		pkg, err := idx.imp.Import(p)
		if err != nil {
			return nil, fmt.Errorf("reading the export data of %s: %w", p, err)
		}
		idx.direct = append(idx.direct, pkg)
	}
	sort.Slice(idx.direct, func(i, j int) bool { return idx.direct[i].Path() < idx.direct[j].Path() })
	for _, pkg := range idx.direct {
		idx.indexPackage(pkg)
	}
	if err := idx.scanSources(); err != nil {
		return nil, err
	}
	return idx, nil
}

// workspacePatterns returns a ./dir/... pattern per module of the workspace.
func workspacePatterns(ctx context.Context, root string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		return []string{"./..."}, nil
	}
	out, err := goCmd(ctx, root, "work", "edit", "-json")
	if err != nil {
		return nil, err
	}
	var w struct{ Use []struct{ DiskPath string } }
	if err := json.Unmarshal(out, &w); err != nil {
		return nil, fmt.Errorf("reading go work edit -json: %w", err)
	}
	var patterns []string
	for _, u := range w.Use {
		patterns = append(patterns, "./"+path.Join(filepath.ToSlash(u.DiskPath), "..."))
	}
	return patterns, nil
}

func goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

func goTool() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// lookup opens the export data of path for the importer; a package outside
// the first list (a Go block importing what no package of the workspace
// does) is listed on its own.
func (idx *index) lookup(p string) (io.ReadCloser, error) {
	idx.mu.Lock()
	file, ok := idx.export[p]
	idx.mu.Unlock()
	if !ok {
		out, err := goCmd(context.Background(), idx.root, "list", "-export", "-f", "{{.Export}}", p)
		if err != nil {
			return nil, fmt.Errorf("package %s: not imported by any package of the workspace, and %w", p, err)
		}
		file = strings.TrimSpace(string(out))
		idx.mu.Lock()
		idx.export[p] = file
		idx.mu.Unlock()
	}
	if file == "" {
		return nil, fmt.Errorf("package %s has no export data", p)
	}
	return os.Open(file)
}

// indexPackage records pkg's top-level names, its named types and their
// fields and methods.
func (idx *index) indexPackage(pkg *types.Package) {
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		idx.topNames[name] = true
		tn, ok := obj.(*types.TypeName)
		if !ok {
			continue
		}
		idx.types[name] = append(idx.types[name], tn)
		t := types.Unalias(tn.Type())
		if named, ok := t.(*types.Named); ok {
			for m := range named.Methods() {
				idx.members[m.Name()] = true
			}
		}
		switch u := t.Underlying().(type) {
		case *types.Struct:
			for f := range u.Fields() {
				idx.members[f.Name()] = true
			}
		case *types.Interface:
			for m := range u.Methods() {
				idx.members[m.Name()] = true
			}
		}
	}
}

var (
	testFunc     = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Example|Fuzz)\w*)\(`)
	majorVersion = regexp.MustCompile(`^v[0-9]+$`)
)

// scanSources reads every Go file under root (all modules, tests included;
// not testdata, hidden or _ directories): the test functions' names, and
// the import names the files use (quals).
func (idx *index) scanSources() error {
	counts := map[string]map[string]int{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(idx.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if p != idx.root && (n == "testdata" || n == "vendor" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, "_test.go") {
			for _, m := range testFunc.FindAllSubmatch(src, -1) {
				idx.testFuncs[string(m[1])] = true
			}
		}
		f, err := parser.ParseFile(fset, p, src, parser.ImportsOnly)
		if err != nil {
			return nil // vet and the build report it; the docs check needs only the others
		}
		for _, spec := range f.Imports {
			ip, _ := strconv.Unquote(spec.Path.Value)
			name := idx.importName(ip)
			if spec.Name != nil {
				name = spec.Name.Name
			}
			if name == "_" || name == "." || name == "" {
				continue
			}
			if counts[name] == nil {
				counts[name] = map[string]int{}
			}
			counts[name][ip]++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the Go sources: %w", err)
	}
	for name, paths := range counts {
		var ps []string
		for p := range paths {
			ps = append(ps, p)
		}
		// The workspace's own package first, then the most imported.
		sort.Slice(ps, func(i, j int) bool {
			ri, rj := idx.isRepo(ps[i]), idx.isRepo(ps[j])
			if ri != rj {
				return ri
			}
			if paths[ps[i]] != paths[ps[j]] {
				return paths[ps[i]] > paths[ps[j]]
			}
			return ps[i] < ps[j]
		})
		idx.quals[name] = ps
	}
	return nil
}

// importName is the name a package is imported under without an alias.
func (idx *index) importName(p string) string {
	if idx.listed(p) {
		if pkg, err := idx.imp.Import(p); err == nil {
			return pkg.Name()
		}
	}
	// Not listed (a test-only import): the last element, without a major
	// version suffix or a go- prefix.
	elems := strings.Split(p, "/")
	last := elems[len(elems)-1]
	if len(elems) > 1 && majorVersion.MatchString(last) {
		last = elems[len(elems)-2]
	}
	last = strings.TrimPrefix(last, "go-")
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' {
			return r
		}
		return -1
	}, last)
}

// importPath returns the package a Go block means by the qualifier q: the
// package the repository's files most often import under that name (one of
// the workspace's first), else the workspace's package of that name; only
// a package the workspace builds with (a separate module's, hack/image's
// say, is not in its build list). "" if none.
func (idx *index) importPath(q string) string {
	for _, p := range idx.quals[q] {
		if idx.listed(p) {
			return p
		}
	}
	if pkgs := idx.byName[q]; len(pkgs) > 0 {
		return pkgs[0].Path()
	}
	return ""
}

// listed reports whether p is a package of the workspace's build.
func (idx *index) listed(p string) bool {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	_, ok := idx.export[p]
	return ok
}

func (idx *index) isRepo(p string) bool {
	for _, pkg := range idx.repo {
		if pkg.Path() == p {
			return true
		}
	}
	return false
}

// packagesFor returns the packages a qualifier can name in the docs: the
// workspace's packages of that name, or whose directory ends with prefix/q
// when the doc writes a path (shard/cache.ProbeShardFiltering), and
// the packages the workspace's files import under that name.
func (idx *index) packagesFor(prefix, q string) []*types.Package {
	var pkgs []*types.Package
	for _, pkg := range idx.byName[q] {
		if prefix == "" || strings.HasSuffix("/"+idx.repoPath[pkg], "/"+prefix+"/"+q) || strings.HasSuffix(pkg.Path(), "/"+prefix+"/"+q) {
			pkgs = append(pkgs, pkg)
		}
	}
	if prefix != "" {
		return pkgs
	}
	for _, p := range idx.quals[q] {
		if pkg, err := idx.imp.Import(p); err == nil && !idx.isRepo(p) {
			pkgs = append(pkgs, pkg)
		}
	}
	return pkgs
}

// errNoMember reports the first name of a chain that does not resolve.
type errNoMember struct{ owner, name string }

func (e errNoMember) Error() string {
	return fmt.Sprintf("%s has no field or method %s", e.owner, e.name)
}

// resolveMembers follows members from an object: a type's fields and
// methods (promoted ones included), a variable's or constant's type's.
func resolveMembers(obj types.Object, members []string) error {
	owner := obj.Name()
	if obj.Pkg() != nil {
		owner = obj.Pkg().Name() + "." + owner
	}
	t := obj.Type()
	if _, isFunc := obj.(*types.Func); isFunc && len(members) > 0 {
		return errNoMember{owner, members[0]}
	}
	for _, m := range members {
		t = types.Unalias(t)
		found, _, _ := types.LookupFieldOrMethod(t, true, obj.Pkg(), m)
		if found == nil {
			return errNoMember{owner, m}
		}
		if _, isFunc := found.(*types.Func); isFunc && m != members[len(members)-1] {
			return errNoMember{owner + "." + m, "(a method)"}
		}
		owner += "." + m
		t = found.Type()
	}
	return nil
}

// typesNamed returns the direct packages' types called name, or
// (fold) called so in any case.
func (idx *index) typesNamed(name string, fold bool) []*types.TypeName {
	if !fold {
		return idx.types[name]
	}
	var tns []*types.TypeName
	for n, ts := range idx.types {
		if strings.EqualFold(n, name) {
			tns = append(tns, ts...)
		}
	}
	return tns
}

// anyTypeHas reports whether some type of the workspace's packages has the
// member chain: the reading of a doc's variable of unnamed type
// (`mgr.AddSingleton`).
func (idx *index) anyTypeHas(members []string) bool {
	if !idx.members[members[0]] {
		return false
	}
	for _, pkg := range idx.direct {
		scope := pkg.Scope()
		for _, name := range scope.Names() {
			if tn, ok := scope.Lookup(name).(*types.TypeName); ok && tn.Exported() {
				if resolveMembers(tn, members) == nil {
					return true
				}
			}
		}
	}
	return false
}

// unresolvedQualifiers returns the names a parsed Go file selects from
// (x in x.Y) but never declares: the packages it needs imported.
func unresolvedQualifiers(f *ast.File) map[string]bool {
	unresolved := map[*ast.Ident]bool{}
	for _, id := range f.Unresolved {
		unresolved[id] = true
	}
	quals := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && unresolved[id] {
				quals[id.Name] = true
			}
		}
		return true
	})
	return quals
}

// leaseKeys returns the labels, annotations and finalizer a member Lease
// carries: the string constants of the workspace's package lease whose
// value is a kshard.io/ key, sorted.
func (idx *index) leaseKeys() []string {
	var keys []string
	for _, pkg := range idx.byName["lease"] {
		if idx.repoPath[pkg] != "lease" {
			continue
		}
		scope := pkg.Scope()
		for _, name := range scope.Names() {
			c, ok := scope.Lookup(name).(*types.Const)
			if !ok || c.Val().Kind() != constant.String {
				continue
			}
			if v := constant.StringVal(c.Val()); strings.HasPrefix(v, "kshard.io/") {
				keys = append(keys, v)
			}
		}
	}
	sort.Strings(keys)
	return keys
}
