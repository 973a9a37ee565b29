package main

import (
	"cmp"
	"fmt"
	"image/color"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// throughputChart draws phase 2's latency-bound throughput per replica
// count (medians, bars from the slowest to the fastest round) for kshard
// and the adapter, controller-runtime's leader as a level line, the ideal
// of n × that leader, and phase 8's sharded-cache runs and phase 10's
// gate-free sharded cache on custom resources where they ran.
func throughputChart(r *results) (*plot.Plot, error) {
	title := "Latency-bound throughput by replica count"
	if r.Params.Latency != "" {
		title = fmt.Sprintf("Latency-bound throughput by replica count (%s per reconcile, %d workers per replica)", r.Params.Latency, r.Params.Workers)
	}
	p := newPlot(title, "replicas (every kshard and adapter replica active)", "objects reconciled per second (median; bars: slowest–fastest round)")
	var base *throughputConfig
	bySystem := map[string][]throughputConfig{}
	for i, c := range r.Throughput.Configs {
		if c.System == crName {
			base = &r.Throughput.Configs[i]
			continue
		}
		bySystem[c.System] = append(bySystem[c.System], c)
	}
	phase8 := phase8Throughput(r.ShardedHandoff)
	phase10 := phase10Throughput(r)
	var replicas []int
	for _, cs := range bySystem {
		for _, c := range cs {
			replicas = append(replicas, c.Replicas)
		}
	}
	for _, g := range phase8 {
		replicas = append(replicas, g.replicas)
	}
	for _, c := range phase10 {
		replicas = append(replicas, c.Replicas)
	}
	if len(replicas) == 0 && base == nil {
		notMeasured(p, "phase 2, 8 or 10")
		return p, nil
	}
	slices.Sort(replicas)
	replicas = slices.Compact(replicas)
	maxN := 1
	if len(replicas) > 0 {
		maxN = replicas[len(replicas)-1]
	}

	if base != nil {
		level := plotter.XYs{{X: 1, Y: base.Median}, {X: float64(maxN), Y: base.Median}}
		if err := series(p, fmt.Sprintf("controller-runtime, %d replicas, 1 leader: %.0f/s", max(base.Replicas, 1), base.Median), level, crColor, nil, vg.Points(6), vg.Points(3)); err != nil {
			return nil, err
		}
		ideal := make(plotter.XYs, 0, maxN)
		for n := 1; n <= maxN; n++ {
			ideal = append(ideal, plotter.XY{X: float64(n), Y: float64(n) * base.Median})
		}
		if err := series(p, "ideal: n × controller-runtime's leader", ideal, idealColor, nil, vg.Points(2), vg.Points(3)); err != nil {
			return nil, err
		}
	}
	// Points at one replica count sit side by side, a little apart, so that
	// their bars do not hide each other.
	for _, s := range []struct {
		system, name string
		c            color.Color
		shape        draw.GlyphDrawer
		dx           float64
	}{
		{kshardName, "kshard (full cache), phase 2", kshardColor, draw.CircleGlyph{}, -0.04},
		{adapterName, "adapter (crshard), phase 2", adapterColor, draw.BoxGlyph{}, 0.04},
	} {
		cs := bySystem[s.system]
		if len(cs) == 0 {
			continue
		}
		slices.SortFunc(cs, func(a, b throughputConfig) int { return cmp.Compare(a.Replicas, b.Replicas) })
		var xys plotter.XYs
		var xs, lo, hi []float64
		var values []string
		for _, c := range cs {
			x := float64(c.Replicas) + s.dx
			xys = append(xys, plotter.XY{X: x, Y: c.Median})
			xs, lo, hi = append(xs, x), append(lo, c.Min), append(hi, c.Max)
			values = append(values, fmt.Sprintf("%.0f/s", c.Median))
		}
		if err := rangeBars(p, xs, lo, hi, s.c); err != nil {
			return nil, err
		}
		if err := series(p, s.name, xys, s.c, s.shape); err != nil {
			return nil, err
		}
		// kshard's values on the left of its points, the adapter's on the right.
		if err := annotate(p, xys, values, s.c, s.dx > 0); err != nil {
			return nil, err
		}
	}
	// Phase 8's runs stand apart, right of their replica count, under a
	// tick of their own.
	phase8X := map[int][]float64{}
	for i, g := range phase8 {
		c, shape := shardedColor, draw.GlyphDrawer(draw.TriangleGlyph{})
		if g.mode == fallbackMode {
			c = fallbackColor
		}
		if g.epochs != "one epoch" {
			shape = draw.PyramidGlyph{}
		}
		x := float64(g.replicas) + 0.3 + 0.07*float64(i)
		phase8X[g.replicas] = append(phase8X[g.replicas], x)
		if err := rangeBars(p, []float64{x}, []float64{g.min}, []float64{g.max}, c); err != nil {
			return nil, err
		}
		name := fmt.Sprintf("kshard %s cache, %s, phase 8", g.mode, g.epochs)
		if _, err := points(p, name, plotter.XYs{{X: x, Y: g.median}}, c, shape, vg.Points(5)); err != nil {
			return nil, err
		}
	}
	// Phase 10's right of phase 8's: its objects are custom resources, so
	// its legend names its own leader's ratio, measured on them.
	phase10X := map[int]float64{}
	for _, c := range phase10 {
		x := float64(c.Replicas) + 0.3 + 0.07*float64(len(phase8X[c.Replicas])) + 0.12
		phase10X[c.Replicas] = x
		if err := rangeBars(p, []float64{x}, []float64{c.Min}, []float64{c.Max}, labelsColor); err != nil {
			return nil, err
		}
		name := fmt.Sprintf("kshard labels cache, gate off, custom resources, phase 10 (%s× its leader)", ratioText(c.Ratio))
		if _, err := points(p, name, plotter.XYs{{X: x, Y: c.Median}}, labelsColor, draw.TriangleGlyph{}, vg.Points(5)); err != nil {
			return nil, err
		}
	}
	var ticks []plot.Tick
	for _, n := range replicas {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: strconv.Itoa(n)})
		if xs := phase8X[n]; len(xs) > 0 {
			ticks = append(ticks, plot.Tick{Value: (xs[0] + xs[len(xs)-1]) / 2, Label: fmt.Sprintf("%d (phase 8)", n)})
		}
		if x, ok := phase10X[n]; ok {
			ticks = append(ticks, plot.Tick{Value: x + 0.05, Label: "(10)"})
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = 0.5, float64(maxN)+0.8
	if len(phase10X) > 0 {
		p.X.Max += 0.2
	}
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.06
	p.Y.Tick.Marker = denseTicks{}
	return p, nil
}

// phase10Throughput is phase 10's kshard configurations of the
// latency-bound workload.
func phase10Throughput(r *results) []throughputConfig {
	if r.Labels == nil {
		return nil
	}
	var out []throughputConfig
	for _, l := range r.Labels.Layouts {
		for _, c := range l.Throughput.Configs {
			if c.System == kshardName {
				out = append(out, c)
			}
		}
	}
	return out
}

// ratioText is a ratio with two decimals, or "—".
func ratioText(v *float64) string {
	if v == nil {
		return "—"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64)
}

// phase8Group is kshard's throughput in one of phase 8's cache modes and
// epoch layouts, over the rounds.
type phase8Group struct {
	mode, epochs     string
	replicas         int
	median, min, max float64
}

// phase8Throughput groups phase 8's kshard runs by cache mode and epoch
// layout, in the order they first appear.
func phase8Throughput(runs []shardedHandoffRun) []phase8Group {
	type key struct {
		mode, epochs string
		replicas     int
	}
	var order []key
	rates := map[key][]float64{}
	for _, run := range runs {
		for _, t := range run.Throughput {
			if t.System != kshardName {
				continue
			}
			k := key{run.CacheMode, cmp.Or(t.Epochs, "epoch per namespace"), t.Replicas}
			if _, ok := rates[k]; !ok {
				order = append(order, k)
			}
			rates[k] = append(rates[k], t.ObjectsPerSec)
		}
	}
	out := make([]phase8Group, 0, len(order))
	for _, k := range order {
		v := rates[k]
		out = append(out, phase8Group{mode: k.mode, epochs: k.epochs, replicas: k.replicas, median: median(v), min: slices.Min(v), max: slices.Max(v)})
	}
	return out
}

func median(v []float64) float64 {
	v = slices.Sorted(slices.Values(v))
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
