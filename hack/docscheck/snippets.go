package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"sort"
	"strconv"
	"strings"
)

// checkGoBlock type-checks one ```go block against the workspace's
// packages, as the compiler would; problems are returned with the doc's own
// lines.
//
// A block with a package clause is a file and is checked as it is. Any
// other block is a fragment, placed in a package of its own: declarations
// (funcs, types) as they are, statements as the body of a function
// returning error (a fragment's `return err` fits, and a fragment that
// reaches its end returns nil). A fragment's packages are imported under the
// names the repository's Go files give them (manager, ctrl, corev1), and
// "declared and not used" is not an error in a fragment, which shows a
// step, not a program.
//
// What a fragment uses but does not declare (cfg, r, ctx, a user's API
// package) is declared by a prelude: Go in an HTML comment on the line
// before the fence, which the rendered page does not show:
//
//	<!-- docs-check:
//	import v1 "github.com/kshard/kshard/cmd/example-operator/api/v1alpha1"
//	var cfg *rest.Config
//	-->
//
// `<!-- docs-check: skip: why -->` skips a block; the reason is required.
func (c *checker) checkGoBlock(doc string, b block) []problem {
	if _, ok := tutorialDirective(b); ok {
		c.stats.tutorial++ // built and run by make tutorial-check, in its own module
		return nil
	}
	if b.hasDir && (b.directive == "skip" || strings.HasPrefix(b.directive, "skip:") || strings.HasPrefix(b.directive, "skip ")) {
		c.stats.skipped++
		if strings.TrimSpace(strings.TrimLeft(strings.TrimPrefix(b.directive, "skip"), ": ")) == "" {
			return []problem{{doc, b.dirLine, "docs-check: skip needs a reason: <!-- docs-check: skip: why the block cannot be built -->"}}
		}
		return nil
	}
	c.stats.blocks++
	fset := token.NewFileSet()
	var src string
	body := b.text
	lineDir := fmt.Sprintf("//line %s:%d\n", doc, b.line)
	if startsWithPackage(body) {
		if b.hasDir {
			return []problem{{doc, b.dirLine, "a block with a package clause is checked as it is: it takes no prelude"}}
		}
		src = lineDir + body
	} else {
		var prelude preludeParts
		if b.hasDir {
			var err error
			if prelude, err = parsePrelude(b.directive); err != nil {
				return []problem{{doc, b.dirLine, fmt.Sprintf("docs-check prelude: %v", err)}}
			}
		}
		assemble := func(imports []string) string {
			var s strings.Builder
			s.WriteString("package docsnippet\n\n")
			// Imports are the prelude's or the block's own: errors in them
			// point at the directive, or the block's first line.
			at := b.line
			if b.hasDir {
				at = b.dirLine
			}
			fmt.Fprintf(&s, "//line %s:%d\n", doc, at)
			for _, imp := range append(prelude.imports, imports...) {
				s.WriteString("import " + imp + "\n")
			}
			if prelude.decls != "" {
				fmt.Fprintf(&s, "//line %s:%d\n%s\n", doc, b.dirLine, prelude.decls)
			}
			if isDeclarations(body) {
				s.WriteString(lineDir + body + "\n")
			} else {
				s.WriteString("func _() error {\n" + lineDir + body + "\nreturn nil\n}\n")
			}
			return s.String()
		}
		src = assemble(nil)
		f, err := parser.ParseFile(token.NewFileSet(), snippetFile, src, 0)
		if err != nil {
			return []problem{{doc, b.line, fmt.Sprintf("Go block does not parse: %v", err)}}
		}
		src = assemble(c.autoImports(f))
	}
	// The //line directives name the doc relative to the file's directory:
	// the file is in the current one.
	f, err := parser.ParseFile(fset, snippetFile, src, parser.SkipObjectResolution)
	if err != nil {
		return []problem{{doc, b.line, fmt.Sprintf("Go block does not parse: %v", err)}}
	}
	var problems []problem
	conf := types.Config{
		Importer: c.idx.imp,
		Error: func(err error) {
			var te types.Error
			if errors.As(err, &te) {
				if te.Soft && strings.Contains(te.Msg, "declared and not used") && !startsWithPackage(body) {
					return
				}
				pos := te.Fset.Position(te.Pos)
				msg := te.Msg
				if strings.HasPrefix(msg, "undefined: ") {
					msg += " (a name the fragment uses but does not declare belongs in a <!-- docs-check: … --> prelude above the fence)"
				}
				problems = append(problems, problem{pos.Filename, pos.Line, "Go block: " + msg})
				return
			}
			problems = append(problems, problem{doc, b.line, "Go block: " + err.Error()})
		},
	}
	conf.Check("docsnippet", fset, []*ast.File{f}, nil)
	return problems
}

const snippetFile = "docsnippet.go"

func startsWithPackage(body string) bool {
	f, err := parser.ParseFile(token.NewFileSet(), "", body, parser.PackageClauseOnly)
	return err == nil && f.Name != nil
}

// isDeclarations reports whether a fragment is top-level declarations
// (funcs, types, vars) rather than statements.
func isDeclarations(body string) bool {
	_, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+body, parser.SkipObjectResolution)
	return err == nil
}

type preludeParts struct {
	imports []string // `name "path"` or `"path"`
	decls   string
}

// parsePrelude splits a prelude into its imports and its declarations.
func parsePrelude(text string) (preludeParts, error) {
	src := "package p\n" + text
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "prelude", src, parser.SkipObjectResolution)
	if err != nil {
		return preludeParts{}, err
	}
	var p preludeParts
	var decls []string
	for _, d := range f.Decls {
		text := src[fset.Position(d.Pos()).Offset:fset.Position(d.End()).Offset]
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.IMPORT {
			for _, s := range g.Specs {
				is := s.(*ast.ImportSpec)
				imp := is.Path.Value
				if is.Name != nil {
					imp = is.Name.Name + " " + imp
				}
				p.imports = append(p.imports, imp)
			}
			continue
		}
		decls = append(decls, text)
	}
	p.decls = strings.Join(decls, "\n")
	return p, nil
}

// autoImports returns an import for each qualifier the file uses but
// neither declares nor imports, under the name the repository's files give
// the package.
func (c *checker) autoImports(f *ast.File) []string {
	imported := map[string]bool{}
	for _, is := range f.Imports {
		p, _ := strconv.Unquote(is.Path.Value)
		name := c.idx.importName(p)
		if is.Name != nil {
			name = is.Name.Name
		}
		imported[name] = true
	}
	var imports []string
	for q := range unresolvedQualifiers(f) {
		if imported[q] {
			continue
		}
		if p := c.idx.importPath(q); p != "" {
			imports = append(imports, q+" "+strconv.Quote(p))
		}
	}
	sort.Strings(imports)
	return imports
}
