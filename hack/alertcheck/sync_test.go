package alertcheck

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "write "+PrometheusRuleFile+" from "+RulesFile)

// root is the repository's root, from this package's directory.
const root = "../.."

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPrometheusRuleMatchesRulesFile: the PrometheusRule is what
// PrometheusRule generates from the rules file, and its spec.groups read
// back equal to the rules file's groups.
func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	want, err := PrometheusRule(read(t, RulesFile))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(filepath.Join(root, PrometheusRuleFile), want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := read(t, PrometheusRuleFile)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not generated from %s: run (cd hack/alertcheck && go test . -update)", PrometheusRuleFile, RulesFile)
	}
	var plain struct {
		Groups []any `yaml:"groups"`
	}
	var obj struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Groups []any `yaml:"groups"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(read(t, RulesFile), &plain); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(got, &obj); err != nil {
		t.Fatal(err)
	}
	if obj.Kind != "PrometheusRule" || len(plain.Groups) == 0 || !reflect.DeepEqual(plain.Groups, obj.Spec.Groups) {
		t.Fatalf("%s's spec.groups differ from %s's groups", PrometheusRuleFile, RulesFile)
	}
}

// loadRulesYAML returns the expressions of the rules file, read as plain
// YAML (no Prometheus parsing: TestAlertsFireOnFaultsOnly does that).
func loadRulesYAML(t *testing.T) []string {
	t.Helper()
	var f struct {
		Groups []struct {
			Rules []struct {
				Expr string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(read(t, RulesFile), &f); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Expr)
		}
	}
	return out
}
