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

// layering is the architecture the library packages keep (docs/design.md,
// "Layout"; issue 43): the published packages, and the internal packages
// the cache rules below name.
var layering = append([]layeringRule{
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
	{
		From:      "github.com/kshard/kshard/internal/cache/...",
		Forbidden: "github.com/kshard/kshard/manager/...",
		Why:       "the caches' building blocks serve both runtimes through shard/cache: none may depend on kshard's manager",
	},
	{
		From:      "github.com/kshard/kshard/internal/cache/...",
		Forbidden: "github.com/kshard/kshard/controller/...",
		Why:       "the caches' building blocks know nothing of controllers: shard/cache routes their events",
	},
	{
		From:      "github.com/kshard/kshard/internal/cache/...",
		Forbidden: "github.com/kshard/kshard/shard/cache/...",
		Why:       "shard/cache is built on the packages under internal/cache, not the other way round",
	},
	{
		From:      "github.com/kshard/kshard/internal/cache/...",
		Forbidden: "github.com/kshard/kshard/internal/cache/cachetest",
		Why:       "cachetest holds the caches' test fakes and fixtures: only tests import it",
	},
}, cacheLayers(
	// From the bottom up: each package may import only those before it.
	"cachekit",   // paged LISTs, the merged view's store, selector helpers
	"shardprobe", // probes whether the API server filters by shard
	"segmented",  // the segmented informer: cachekit, shardprobe
	"labelled",   // the labelled cache and its write path: cachekit, segmented
)...)

// cacheLayers returns, for packages under internal/cache listed from the
// bottom up, the rules that forbid each to import any listed after it.
func cacheLayers(bottomUp ...string) []layeringRule {
	const base = "github.com/kshard/kshard/internal/cache/"
	var rules []layeringRule
	for i, from := range bottomUp {
		for _, above := range bottomUp[i+1:] {
			rules = append(rules, layeringRule{
				From: base + from, Forbidden: base + above,
				Why: fmt.Sprintf("internal/cache's packages are layered %s from the bottom up (hack/apicheck/layering.go): %s is below %s", strings.Join(bottomUp, ", "), from, above),
			})
		}
	}
	return rules
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
