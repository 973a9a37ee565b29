package main

import (
	"fmt"
	"sort"
	"strings"
)

// A layeringRule forbids the published packages under From to import
// Forbidden (a package or, with a trailing "/...", a tree), except the
// packages in Allowed, each with the reason it is an exception.
type layeringRule struct {
	From, Forbidden string
	Why             string
	Allowed         map[string]string
}

// layering is the architecture the published packages keep (docs/design.md,
// "Layout"; issue 43).
var layering = []layeringRule{
	{
		From:      "github.com/kshard/kshard/controller/crshard/...",
		Forbidden: "github.com/kshard/kshard/manager/...",
		Why:       "the adapter is a runtime beside kshard's manager: it builds on the shared building blocks under shard/ (ring, fence, cache), never on the manager",
	},
	{
		From:      "github.com/kshard/kshard/controller/crshard/...",
		Forbidden: "github.com/kshard/kshard/internal/...",
		Why:       "the adapter is a module of its own that a user's build may pair with a newer root module: it may use only the root's published API, which keeps its promises",
	},
	{
		From:      "github.com/kshard/kshard/shard/...",
		Forbidden: "github.com/kshard/kshard/manager/...",
		Why:       "the building blocks under shard/ serve both runtimes, kshard's manager and the adapter: none may depend on the manager",
	},
	{
		From:      "github.com/kshard/kshard/...",
		Forbidden: "reflect",
		Why:       "library code reads no other package's internals by reflection; a change there would turn a check into a silent guess",
		Allowed: map[string]string{
			// Get and List fill the caller's typed object, which Go can
			// assign only through reflection without generics (as
			// controller-runtime's cache reader does): a copy of one
			// concrete type into another of the same type, checked first.
			"github.com/kshard/kshard/shard/cache": "reads into the caller's typed object",
		},
	},
}

// matches reports whether importPath is pattern, or lies under it when
// pattern ends in "/...".
func matches(pattern, importPath string) bool {
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return importPath == tree || strings.HasPrefix(importPath, tree+"/")
	}
	return importPath == pattern
}

// checkLayering returns one line per import that breaks a rule, sorted.
func checkLayering(imports map[string][]string, rules []layeringRule) []string {
	var broken []string
	for pkg, imps := range imports {
		for _, r := range rules {
			if !matches(r.From, pkg) {
				continue
			}
			if _, ok := r.Allowed[pkg]; ok {
				continue
			}
			for _, imp := range imps {
				if matches(r.Forbidden, imp) {
					broken = append(broken, fmt.Sprintf("%s imports %s: %s", pkg, imp, r.Why))
				}
			}
		}
	}
	sort.Strings(broken)
	return broken
}

// A layeringError lists the imports that break the layering rules; the
// process exits 1 for it, as for an API change.
type layeringError struct{ broken []string }

func (e *layeringError) Error() string {
	return fmt.Sprintf("the published packages break %d layering rule(s) (hack/apicheck/layering.go):\n  %s\nMove the code to the package the rule allows, or, for a real exception, add it to the rule's Allowed with its reason.",
		len(e.broken), strings.Join(e.broken, "\n  "))
}
