package main

import (
	"fmt"
	"go/scanner"
	"go/token"
	"go/types"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A goRef is a dotted chain of identifiers in a code span.
type goRef struct {
	prefix string   // a directory written before the qualifier: "shard" in shard/cache.X
	chain  []string // "controller", "Options", "Registry"
	call   bool     // followed by ( or {: a call or a composite literal
	glob   bool     // followed by *: a name prefix (BenchmarkPartitionOf*)
}

func (r goRef) String() string {
	s := strings.Join(r.chain, ".")
	if r.prefix != "" {
		s = r.prefix + "/" + s
	}
	return s
}

type tok struct {
	t   token.Token
	lit string
}

// goRefs returns the chains of identifiers in text, scanned as Go tokens (a
// span is Go, prose or a shell word alike: what is not an identifier
// chain is passed over).
func goRefs(text string) []goRef {
	var s scanner.Scanner
	fset := token.NewFileSet()
	src := []byte(text)
	s.Init(fset.AddFile("", -1, len(src)), src, func(token.Position, string) {}, 0)
	var toks []tok
	for {
		_, t, lit := s.Scan()
		if t == token.EOF {
			break
		}
		if t == token.SEMICOLON && lit == "\n" {
			continue // inserted at the end
		}
		toks = append(toks, tok{t, lit})
	}
	var refs []goRef
	for i := 0; i < len(toks); i++ {
		if toks[i].t != token.IDENT || (i > 0 && toks[i-1].t == token.PERIOD) {
			continue
		}
		start := i
		r := goRef{chain: []string{toks[i].lit}}
		for i+2 < len(toks) && toks[i+1].t == token.PERIOD && toks[i+2].t == token.IDENT {
			r.chain = append(r.chain, toks[i+2].lit)
			i += 2
		}
		// A directory before the qualifier: shard/cache.ProbeShardFiltering.
		var dirs []string
		for j := start; j >= 2 && toks[j-1].t == token.QUO && toks[j-2].t == token.IDENT; j -= 2 {
			if j >= 3 && toks[j-3].t == token.PERIOD {
				dirs = nil // a host name or a file's extension: kshard.io/ring
				break
			}
			dirs = append([]string{toks[j-2].lit}, dirs...)
		}
		r.prefix = strings.Join(dirs, "/")
		if i+1 < len(toks) {
			switch toks[i+1].t {
			case token.QUO:
				continue // a directory: shard in shard/cache.X
			case token.LPAREN, token.LBRACE:
				r.call = true
			case token.MUL:
				r.glob = true
			}
		}
		refs = append(refs, r)
	}
	return refs
}

func exported(name string) bool {
	r, _ := utf8.DecodeRuneInString(name)
	return unicode.IsUpper(r)
}

var (
	testName = regexp.MustCompile(`^(Test|Benchmark|Example|Fuzz)([A-Z_0-9]|$)`)
	// vX.Y.Z, v1.2.3: a version, not a chain.
	versionLike = regexp.MustCompile(`^v[0-9X]`)
)

// kind says which rule checks a chain, or "" for a chain the check leaves
// alone: lower-case members (metadata.name, ring.go, kshard.io) are field
// paths, file and host names, and a lone upper-case word (POD_NAME,
// OBJECTS) an environment variable or a column. A lone capitalised name
// (`LeaseDuration`, `GracePeriod(d)`) must be some package's name, or a
// field or method of some type: which type the prose means is not known,
// so this rule is loose, but a name that exists nowhere fails.
func (r goRef) kind() string {
	if len(r.chain) >= 2 {
		for _, m := range r.chain[1:] {
			if !exported(m) {
				return ""
			}
		}
		if versionLike.MatchString(r.chain[0]) {
			return ""
		}
		return "qualified"
	}
	name := r.chain[0]
	switch {
	case testName.MatchString(name):
		return "test"
	case nonGoNames[name] != "":
		return ""
	case exported(name) && (r.call || strings.ToUpper(name) != name):
		return "bare"
	}
	return ""
}

// Capitalised names in the docs that are not Go, with what they are.
var nonGoNames = map[string]string{
	"ListFromCacheSnapshot": "a Kubernetes feature gate",
}

// resolve checks one chain against the index; it returns "" when the chain
// names something that exists, else what is wrong.
func (idx *index) resolve(r goRef) string {
	switch r.kind() {
	case "test":
		name := r.chain[0]
		if r.glob {
			for f := range idx.testFuncs {
				if strings.HasPrefix(f, name) {
					return ""
				}
			}
			return fmt.Sprintf("no test function starts with %s", name)
		}
		if idx.testFuncs[name] || idx.topNames[name] {
			return ""
		}
		return fmt.Sprintf("no test function %s in the repository's _test.go files", name)
	case "bare":
		name := r.chain[0]
		if idx.topNames[name] || idx.members[name] || idx.alerts[name] {
			return ""
		}
		return fmt.Sprintf("no function, type, method or field %s in the workspace's packages or the packages they import, nor alert in %s", name, alertRules)
	case "qualified":
		return idx.resolveQualified(r)
	}
	return ""
}

func (idx *index) resolveQualified(r goRef) string {
	q, members := r.chain[0], r.chain[1:]
	if exported(q) {
		// Type.Member: a type (or a variable) of that name in any package.
		var found bool
		var lastErr error
		for _, pkg := range idx.direct {
			obj := pkg.Scope().Lookup(q)
			if obj == nil {
				continue
			}
			found = true
			if lastErr = resolveMembers(obj, members); lastErr == nil {
				return ""
			}
		}
		if !found {
			return fmt.Sprintf("no type %s in the workspace's packages or the packages they import", q)
		}
		return lastErr.Error()
	}
	pkgs := idx.packagesFor(r.prefix, q)
	var lastErr error
	var without []*types.Package
	for _, pkg := range pkgs {
		obj := pkg.Scope().Lookup(members[0])
		if obj == nil || !obj.Exported() {
			without = append(without, pkg)
			continue
		}
		if lastErr = resolveMembers(obj, members[1:]); lastErr == nil {
			return ""
		}
	}
	if lastErr == nil && len(without) > 0 {
		lastErr = fmt.Errorf("no package %s has %s (%s)", q, members[0], pkgList(without))
	}
	// A variable named after its type: ring (a *crshard.Ring).
	for _, tn := range idx.typesNamed(q, true) {
		if resolveMembers(tn, members) == nil {
			return ""
		}
	}
	if r.prefix != "" && len(pkgs) == 0 {
		return fmt.Sprintf("no package %s/%s in the workspace", r.prefix, q)
	}
	if len(pkgs) == 0 {
		// A variable of the doc's own (mgr, r): some type must have the
		// members.
		if idx.anyTypeHas(members) {
			return ""
		}
		return fmt.Sprintf("%s is no package of the workspace or import name its files use, and no type of theirs has %s", q, strings.Join(members, "."))
	}
	return lastErr.Error()
}

// pkgList names packages for a message.
func pkgList(pkgs []*types.Package) string {
	var s []string
	for _, p := range pkgs {
		s = append(s, p.Path())
	}
	return strings.Join(s, ", ")
}
