package alertcheck

import (
	"bytes"
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Paths of the monitoring files, from the repository's root.
const (
	RulesFile          = "deploy/monitoring/kshard-alerts.rules.yaml"
	PrometheusRuleFile = "deploy/monitoring/prometheusrule.yaml"
	DashboardFile      = "deploy/monitoring/kshard-dashboard.json"
)

// PrometheusRule returns the PrometheusRule object (monitoring.coreos.com/v1)
// carrying the groups of the plain rules file rules, as the Prometheus
// Operator loads them: the same rules, key for key.
func PrometheusRule(rules []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(rules, &doc); err != nil {
		return nil, fmt.Errorf("reading the rules file: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("the rules file is not one YAML mapping")
	}
	var groups *yaml.Node
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "groups" {
			groups = top.Content[i+1]
		}
	}
	if groups == nil {
		return nil, errors.New("the rules file has no groups")
	}
	obj := map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PrometheusRule",
		"metadata": map[string]any{
			"name":   "kshard",
			"labels": map[string]string{"app.kubernetes.io/name": "kshard"},
		},
		"spec": map[string]any{"groups": groups},
	}
	var out bytes.Buffer
	out.WriteString("# Generated from kshard-alerts.rules.yaml by hack/alertcheck\n# (cd hack/alertcheck && go test . -update): edit that file, not this one.\n")
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(obj); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
