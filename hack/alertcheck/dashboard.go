package alertcheck

import (
	"encoding/json"
	"strings"
)

// The Grafana dashboard is generated here rather than drawn in Grafana, so
// that its queries are reviewed as code and checked against the metrics
// kshard exports (TestQueriesNameExportedMetrics). It uses only the
// dashboard JSON model (schemaVersion 39): timeseries and stat panels,
// a Prometheus data source variable, and namespace and job variables.

// sel is the series selector every query carries: the ring's namespace and
// scrape job, chosen in the dashboard's variables.
const sel = `namespace="$namespace",job="$job"`

type target struct {
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat,omitempty"`
	RefID        string `json:"refId"`
}

type panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	GridPos     map[string]int `json:"gridPos"`
	Datasource  map[string]any `json:"datasource,omitempty"`
	Targets     []target       `json:"targets,omitempty"`
	FieldConfig map[string]any `json:"fieldConfig,omitempty"`
	Collapsed   *bool          `json:"collapsed,omitempty"`
	Panels      []panel        `json:"panels,omitempty"`
}

// spec is one panel: a title, a description, its unit and its queries
// (expression, legend).
type spec struct {
	title, description, unit string
	stat                     bool
	queries                  [][2]string
}

var rows = []struct {
	title  string
	panels []spec
}{
	{"Ring health (each replica's view of the Leases; 0 is healthy)", []spec{
		{title: "Unclaimed partitions", stat: true, description: "Partitions no live Lease claims: nobody reconciles their keys (alert KshardRingUnclaimedPartitions).",
			queries: [][2]string{{`max(kshard_ring_unclaimed_partitions{` + sel + `})`, ""}}},
		{title: "Overlapping partitions", stat: true, description: "Partitions two live Leases claim: normal during a drain, a stuck drain if it lasts.",
			queries: [][2]string{{`max(kshard_ring_overlapping_partitions{` + sel + `})`, ""}}},
		{title: "Malformed Leases", stat: true, description: "Leases with the ring label that do not follow the Lease format.",
			queries: [][2]string{{`max(kshard_ring_malformed_leases{` + sel + `})`, ""}}},
		{title: "Foreign configurations", stat: true, description: "Live Leases whose ring-parameters fingerprint differs from the replica's.",
			queries: [][2]string{{`max(kshard_ring_foreign_leases{` + sel + `})`, ""}}},
		{title: "Members and replicas", description: "Ring members in the fullest view against the replicas scraped, and those ready.",
			queries: [][2]string{
				{`max(kshard_ring_members{` + sel + `})`, "members"},
				{`count(kshard_ready{` + sel + `})`, "replicas scraped"},
				{`sum(kshard_ready{` + sel + `})`, "ready"},
			}},
		{title: "Ring health over time", description: "The three numbers that must be 0, by replica.",
			queries: [][2]string{
				{`kshard_ring_unclaimed_partitions{` + sel + `}`, "unclaimed {{pod}}"},
				{`kshard_ring_overlapping_partitions{` + sel + `}`, "overlapping {{pod}}"},
				{`kshard_ring_malformed_leases{` + sel + `}`, "malformed {{pod}}"},
			}},
	}},
	{"Handoffs", []spec{
		{title: "Oldest partition move under way", unit: "s", description: "takeover, drain, handover: seconds; alert KshardHandoffStuck above 300.",
			queries: [][2]string{{`kshard_ring_oldest_pending_seconds{` + sel + `}`, "{{pod}} {{phase}}"}}},
		{title: "Partitions by state", description: "kshard_partitions per replica and state.",
			queries: [][2]string{{`sum by (pod, state) (kshard_partitions{` + sel + `})`, "{{pod}} {{state}}"}}},
		{title: "Handoff latency (p50, p99)", unit: "s", description: "From a partition entering a replica's target to its activation there.",
			queries: [][2]string{
				{`histogram_quantile(0.5, sum by (le) (rate(kshard_handoff_seconds_bucket{` + sel + `}[5m])))`, "p50"},
				{`histogram_quantile(0.99, sum by (le) (rate(kshard_handoff_seconds_bucket{` + sel + `}[5m])))`, "p99"},
			}},
		{title: "Rebalances, fences and overdue drains", description: "Increases over 15 minutes.",
			queries: [][2]string{
				{`sum by (pod) (increase(kshard_rebalances_total{` + sel + `}[15m]))`, "rebalances {{pod}}"},
				{`sum by (pod) (increase(kshard_fences_total{` + sel + `}[15m]))`, "fences {{pod}}"},
				{`sum by (controller) (increase(kshard_drain_overdue_total{` + sel + `}[15m]))`, "overdue drains {{controller}}"},
			}},
		{title: "Coordinator step (p99)", unit: "s", description: "A step longer than RenewDeadline − RenewPeriod delays fencing.",
			queries: [][2]string{{`histogram_quantile(0.99, sum by (le, pod) (rate(kshard_coordinator_step_seconds_bucket{` + sel + `}[5m])))`, "{{pod}}"}}},
		{title: "Lease renewals", description: "Renew errors and malformed Leases seen, per second.",
			queries: [][2]string{
				{`sum by (pod) (rate(kshard_lease_renew_errors_total{` + sel + `}[5m]))`, "renew errors {{pod}}"},
				{`sum by (reason) (rate(kshard_lease_invalid_total{` + sel + `}[5m]))`, "invalid {{reason}}"},
			}},
	}},
	{"Controllers", []spec{
		{title: "Gate decisions", description: "Requests per second by controller and decision.",
			queries: [][2]string{{`sum by (controller, decision) (rate(kshard_gate_decisions_total{` + sel + `}[5m]))`, "{{controller}} {{decision}}"}}},
		{title: "Reconciles in flight", description: "Per controller, summed over replicas.",
			queries: [][2]string{{`sum by (controller) (kshard_partition_inflight{` + sel + `})`, "{{controller}}"}}},
		{title: "Refused reconciles and writes", description: "Reconciles not started, and writes refused, because the lease validity had passed.",
			queries: [][2]string{
				{`sum by (controller) (rate(kshard_reconcile_refused_total{` + sel + `}[5m]))`, "reconciles {{controller}}"},
				{`sum by (reason) (rate(kshard_writes_refused_total{` + sel + `}[5m]))`, "writes {{reason}}"},
			}},
		{title: "Replay backlog", description: "Requests of activations' replays not queued yet.",
			queries: [][2]string{{`sum by (controller) (kshard_replay_backlog{` + sel + `})`, "{{controller}}"}}},
	}},
	{"Sharded cache", []spec{
		{title: "Cached objects", description: "Per replica and kind: compare replicas to see how evenly the ring spreads the objects.",
			queries: [][2]string{{`sum by (pod, kind_name) (kshard_cache_objects{` + sel + `})`, "{{pod}} {{kind_name}}"}}},
		{title: "Objects missing from the cache", description: "Found by the self-check of a kind cached by labels: a bug of the cache (alert KshardCacheMissingObjects).",
			queries: [][2]string{{`kshard_cache_missing_objects{` + sel + `}`, "{{pod}} {{kind_name}}"}}},
		{title: "Label backlog", description: "Objects waiting for their partition label (alert KshardLabelBacklogGrowing).",
			queries: [][2]string{{`kshard_cache_label_backlog{` + sel + `}`, "{{pod}} {{kind_name}}"}}},
		{title: "Label patches and relists", description: "Per second.",
			queries: [][2]string{
				{`sum by (kind_name) (rate(kshard_cache_label_patches_total{` + sel + `}[5m]))`, "patches {{kind_name}}"},
				{`sum by (kind_name) (rate(kshard_cache_listed_objects_total{` + sel + `}[5m]))`, "listed {{kind_name}}"},
			}},
	}},
}

var datasource = map[string]any{"type": "prometheus", "uid": "${datasource}"}

// Dashboard returns the dashboard's JSON.
func Dashboard() ([]byte, error) {
	var panels []panel
	id, y := 1, 0
	for _, row := range rows {
		collapsed := false
		panels = append(panels, panel{ID: id, Type: "row", Title: row.title, Collapsed: &collapsed,
			GridPos: map[string]int{"x": 0, "y": y, "w": 24, "h": 1}})
		id, y = id+1, y+1
		x := 0
		for _, s := range row.panels {
			w, h := 12, 8
			typ := "timeseries"
			if s.stat {
				w, h, typ = 6, 4, "stat"
			}
			if x+w > 24 {
				x, y = 0, y+h
			}
			p := panel{ID: id, Type: typ, Title: s.title, Description: s.description, Datasource: datasource,
				GridPos: map[string]int{"x": x, "y": y, "w": w, "h": h}}
			defaults := map[string]any{}
			if s.unit != "" {
				defaults["unit"] = s.unit
			}
			if s.stat {
				defaults["thresholds"] = map[string]any{"mode": "absolute", "steps": []map[string]any{
					{"color": "green", "value": nil}, {"color": "red", "value": 1}}}
			}
			p.FieldConfig = map[string]any{"defaults": defaults, "overrides": []any{}}
			for i, q := range s.queries {
				p.Targets = append(p.Targets, target{Expr: q[0], LegendFormat: q[1], RefID: string(rune('A' + i))})
			}
			panels = append(panels, p)
			id, x = id+1, x+w
		}
		y += 8
	}
	variable := func(name, query string) map[string]any {
		return map[string]any{"name": name, "label": name, "type": "query", "datasource": datasource,
			"query":      map[string]any{"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
			"definition": query, "refresh": 2, "sort": 1}
	}
	d := map[string]any{
		"title":         "kshard",
		"uid":           "kshard-ring",
		"description":   "kshard rings: ring health, handoffs, controllers and the sharded cache. Generated by hack/alertcheck (dashboard.go); see docs/operations.md.",
		"tags":          []string{"kshard"},
		"schemaVersion": 39,
		"editable":      true,
		"time":          map[string]string{"from": "now-3h", "to": "now"},
		"refresh":       "30s",
		"templating": map[string]any{"list": []any{
			map[string]any{"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus"},
			variable("namespace", "label_values(kshard_ready, namespace)"),
			variable("job", `label_values(kshard_ready{namespace="$namespace"}, job)`),
		}},
		"panels": panels,
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Queries returns every PromQL expression of the dashboard JSON b: its
// panels' targets and its variables' queries.
func Queries(b []byte) ([]string, error) {
	var d struct {
		Panels []struct {
			Targets []target `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, t.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			out = append(out, strings.TrimSpace(v.Definition))
		}
	}
	return out, nil
}
