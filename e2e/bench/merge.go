package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// allPhases are the phase numbers a full run measures.
// Phase 9 (the scale envelope) runs only when asked for; a default run
// keeps its figures from results.json.
var allPhases = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}

// provenance says which run measured a phase kept in results.json, so a
// file assembled from several runs still names the command, parameters and
// machine load behind every figure.
type provenance struct {
	Command string         `json:"command"`
	Date    string         `json:"date"`
	Load    string         `json:"loadavg_start"`
	Params  map[string]any `json:"params"`
	// Commit is the kshard commit that run measured (env.Commit); files
	// from before it was recorded have none.
	Commit string `json:"commit,omitempty"`
	// Error: that run failed or was cut short so (its figures are what it
	// measured before).
	Error string `json:"error,omitempty"`
}

// provenanceOf names prev as the run that measured a kept phase.
func provenanceOf(prev *results) provenance {
	return provenance{Command: prev.Command, Date: prev.Env.Date, Load: prev.Env.LoadStart, Params: prev.ParamsView, Commit: prev.Env.Commit, Error: prev.Error}
}

// loadResults reads a results.json written earlier; a missing file is not
// an error (nil results).
func loadResults(path string) (*results, error) {
	js, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r results
	if err := json.Unmarshal(js, &r); err != nil {
		return nil, fmt.Errorf("%s is not a benchmark results file (%v); delete it or pass -merge=false", path, err)
	}
	return &r, nil
}

// keepEarlier fills the sections of the phases this run did not measure
// from an earlier run's results, so a run of a few phases updates
// results.json instead of replacing it. Quick runs never mix with full
// ones. It returns the kept phases.
func (r *results) keepEarlier(prev *results) ([]int, error) {
	if prev == nil {
		return nil, nil
	}
	if quickOf(prev) != r.Params.Quick {
		return nil, errors.New("the earlier results.json and this run differ in -quick; use another -out or -merge=false")
	}
	var kept []int
	for _, ph := range allPhases {
		if r.Params.Phases[ph] || !prev.measured(ph) {
			continue
		}
		kept = append(kept, ph)
		switch ph {
		case 1:
			r.Ceiling = prev.Ceiling
		case 2:
			r.Throughput, r.WriteBound = prev.Throughput, prev.WriteBound
		case 3:
			r.Handoff = prev.Handoff
		case 4:
			r.Failover = prev.Failover
		case 5:
			r.Resources = prev.Resources
		case 6:
			r.RestartFailover, r.RestartFailoverAdapter = prev.RestartFailover, prev.RestartFailoverAdapter
		case 7:
			r.ShardedRuns = prev.ShardedRuns
		case 8:
			r.ShardedHandoff = prev.ShardedHandoff
		case 9:
			r.Scale = prev.Scale
		case 10:
			r.Labels = prev.Labels
		}
		if r.Provenance == nil {
			r.Provenance = map[string]provenance{}
		}
		key := strconv.Itoa(ph)
		if pv, ok := prev.Provenance[key]; ok {
			r.Provenance[key] = pv
		} else if ph == 10 && labelsPartsOf(prev) == labelsPartsThroughput {
			// That run measured only the spread layout's throughput; the
			// rest of phase 10 has provenance of its own below.
			r.Provenance[labelsThroughputPart] = provenanceOf(prev)
		} else {
			r.Provenance[key] = provenanceOf(prev)
		}
		// A phase kept whole keeps the provenance of its parts measured
		// by other runs too ("10 (spread)").
		for k, pv := range prev.Provenance {
			if strings.HasPrefix(k, key+" (") {
				r.Provenance[k] = pv
			}
		}
	}
	r.keepEarlierLayouts(prev)
	if slices.Contains(kept, 1) != slices.Contains(kept, 2) && r.Params.Phases[1] != r.Params.Phases[2] {
		r.Warnings = append(r.Warnings, "phases 1 and 2 come from different runs: ceiling fractions divide one run's throughput by another run's ceiling")
	}
	return kept, nil
}

// keepEarlierLayouts: a phase 10 run of some layouts (-labels-layouts)
// keeps the earlier file's other layouts, each with the provenance of the
// run that measured it under "10 (layout)", in the order of the layouts in
// a full run.
func (r *results) keepEarlierLayouts(prev *results) {
	if !r.Params.Phases[10] || prev.Labels == nil {
		return
	}
	for _, l := range prev.Labels.Layouts {
		if slices.Contains(r.Params.LabelsLayouts, l.Layout) {
			continue
		}
		if r.Labels == nil {
			r.Labels = &labelsResults{}
		}
		r.Labels.Layouts = append(r.Labels.Layouts, l)
		if r.Provenance == nil {
			r.Provenance = map[string]provenance{}
		}
		// Named on its own, or else measured by the run that the earlier
		// file kept phase 10 from, or else by the earlier run itself.
		pv, ok := prev.Provenance["10 ("+l.Layout+")"]
		if !ok {
			pv, ok = prev.Provenance["10"]
		}
		if !ok {
			pv = provenanceOf(prev)
		}
		r.Provenance["10 ("+l.Layout+")"] = pv
		if l.Layout != layoutSpread {
			continue
		}
		// The spread layout's throughput, when a throughput-only run
		// measured it.
		if pv, ok := prev.Provenance[labelsThroughputPart]; ok {
			r.Provenance[labelsThroughputPart] = pv
		} else if labelsPartsOf(prev) == labelsPartsThroughput {
			r.Provenance[labelsThroughputPart] = provenanceOf(prev)
		}
	}
	r.keepEarlierLabelsParts(prev)
	if r.Labels != nil {
		order := defaultParams(false).LabelsLayouts
		slices.SortStableFunc(r.Labels.Layouts, func(a, b labelsLayout) int {
			return slices.Index(order, a.Layout) - slices.Index(order, b.Layout)
		})
	}
}

// quickOf reads -quick from a loaded file (Params is not serialised; its
// view is).
func quickOf(r *results) bool {
	q, _ := r.ParamsView["quick"].(bool)
	return q
}

// measured reports whether the results hold the section of phase ph.
func (r *results) measured(ph int) bool {
	switch ph {
	case 1:
		return len(r.Ceiling) > 0
	case 2:
		return len(r.Throughput.Samples) > 0 || len(r.WriteBound.Samples) > 0
	case 3:
		return len(r.Handoff) > 0
	case 4:
		return len(r.Failover) > 0
	case 5:
		return len(r.Resources) > 0
	case 6:
		return r.RestartFailover != nil
	case 7:
		return len(r.ShardedRuns) > 0
	case 8:
		return len(r.ShardedHandoff) > 0
	case 9:
		return r.Scale != nil && len(r.Scale.Runs) > 0
	case 10:
		return r.Labels != nil && len(r.Labels.Layouts) > 0
	}
	return false
}

// mergeTarget is the results.json a run of some phases, or of some of
// phase 10's layouts, merges into, or "" when the run measures everything
// (or merging is off).
func mergeTarget(p params, out string, merge bool) string {
	if !merge {
		return ""
	}
	for _, ph := range allPhases {
		if !p.Phases[ph] {
			return filepath.Join(out, "results.json")
		}
	}
	if len(p.LabelsLayouts) < len(layoutFlags) || p.LabelsParts != "" {
		return filepath.Join(out, "results.json")
	}
	return ""
}

// phaseList renders the phases a run measured, "4, 6".
func phaseList(phases map[int]bool) string {
	var out []string
	for _, ph := range allPhases {
		if phases[ph] {
			out = append(out, strconv.Itoa(ph))
		}
	}
	return strings.Join(out, ", ")
}

// notRecorded stands for a commit that a run from before commits were
// recorded did not write down.
const notRecorded = "not recorded"

// phaseRun is the run behind one phase (or one part of a phase, "10
// (spread)") of a results file: its commit, date and load at start.
type phaseRun struct {
	Phase, Commit, Date, Load string
}

// phaseRuns lists, for every phase the file holds, the run that measured
// it: this run for the phases it measured, the provenance of the others
// (and of parts kept from other runs), in phase order.
func (r *results) phaseRuns() []phaseRun {
	own := func(phase string) phaseRun {
		return phaseRun{Phase: phase, Commit: cmp.Or(r.Env.Commit, notRecorded), Date: r.Env.Date, Load: r.Env.LoadStart}
	}
	kept := func(phase string, pv provenance) phaseRun {
		return phaseRun{Phase: phase, Commit: cmp.Or(pv.Commit, notRecorded), Date: pv.Date, Load: pv.Load}
	}
	var out []phaseRun
	for _, ph := range allPhases {
		key := strconv.Itoa(ph)
		switch {
		case r.Params.Phases[ph] && r.measured(ph):
			name := key
			switch {
			case ph == 10 && r.Params.LabelsParts == labelsPartsThroughput:
				name = labelsThroughputPart
			case ph == 10 && len(r.Params.LabelsLayouts) == 1:
				name += " (" + r.Params.LabelsLayouts[0] + ")"
			}
			out = append(out, own(name))
		case r.Provenance[key].Date != "" || r.Provenance[key].Command != "":
			out = append(out, kept(key, r.Provenance[key]))
		}
		for _, k := range slices.Sorted(maps.Keys(r.Provenance)) {
			if strings.HasPrefix(k, key+" (") {
				out = append(out, kept(k, r.Provenance[k]))
			}
		}
	}
	return out
}

// phaseCommits is phase_commits in results.json: each phase's (or part's)
// commit.
func (r *results) phaseCommits() map[string]string {
	out := map[string]string{}
	for _, pr := range r.phaseRuns() {
		out[pr.Phase] = pr.Commit
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// gitCommit is the checkout's commit, "abc1234", with "+dirty" when a
// tracked file differs from it other than the benchmark's own output
// (results.json, RESULTS.md, the charts), which a run rewrites; "" when git
// cannot tell.
func gitCommit(ctx context.Context, root string) string {
	head, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	commit := strings.TrimSpace(string(head))
	status, err := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output()
	if err != nil {
		return commit + "+unknown"
	}
	if dirtyBeyondOutput(string(status)) {
		commit += "+dirty"
	}
	return commit
}

// dirtyBeyondOutput reports whether `git status --porcelain` lists a
// changed file other than the benchmark's committed output.
func dirtyBeyondOutput(porcelain string) bool {
	for _, line := range strings.Split(porcelain, "\n") {
		if len(line) < 4 {
			continue
		}
		path := line[3:]
		if _, to, ok := strings.Cut(path, " -> "); ok {
			path = to
		}
		path = strings.Trim(path, `"`)
		dir, file := filepath.Split(path)
		if dir == "e2e/bench/" && (file == "results.json" || file == "RESULTS.md" || strings.HasSuffix(file, ".png")) {
			continue
		}
		return true
	}
	return false
}

// labelsPartsOf reads -labels-parts from a loaded file ("" for all).
func labelsPartsOf(r *results) string {
	parts, _ := r.ParamsView["labels_parts"].(string)
	return parts
}

// keepEarlierLabelsParts: a run of the spread layout's throughput alone
// (-labels-parts throughput) keeps the earlier file's other figures of
// that layout (first starts, memory rounds, handoff, failover), named by
// the run that measured them under "10 (spread)".
func (r *results) keepEarlierLabelsParts(prev *results) {
	if r.Params.LabelsParts != labelsPartsThroughput || r.Labels == nil || prev.Labels == nil {
		return
	}
	i := slices.IndexFunc(r.Labels.Layouts, func(l labelsLayout) bool { return l.Layout == layoutSpread })
	j := slices.IndexFunc(prev.Labels.Layouts, func(l labelsLayout) bool { return l.Layout == layoutSpread })
	if i < 0 || j < 0 {
		return
	}
	cur, old := &r.Labels.Layouts[i], prev.Labels.Layouts[j]
	cur.Namespaces, cur.FirstStarts, cur.Runs, cur.Handoff, cur.Failover = old.Namespaces, old.FirstStarts, old.Runs, old.Handoff, old.Failover
	key := "10 (" + layoutSpread + ")"
	pv, ok := prev.Provenance[key]
	if !ok {
		pv, ok = prev.Provenance["10"]
	}
	if !ok {
		pv = provenanceOf(prev)
	}
	if r.Provenance == nil {
		r.Provenance = map[string]provenance{}
	}
	r.Provenance[key] = pv
}
