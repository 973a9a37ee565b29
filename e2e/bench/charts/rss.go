package main

import (
	"cmp"
	"fmt"
	"image/color"
	"maps"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// rssChart draws the peak RSS of each fleet's largest replica against the
// objects it caches, in two panels on one scale: by cache mode (phase 7's
// controller-runtime leader, kshard's sharded cache and its fallback,
// phase 5's full caches, and phase 10's gate-free sharded cache on custom
// resources), and the sharded cache by fleet size (phase 9).
func rssChart(r *results) (figure, error) {
	const rssTitle = "Peak RSS of the largest replica by object count"
	const yLabel = "peak RSS of the largest replica (MiB)"
	modes := newPlot("By cache mode (phases 5, 7 and 10)", "objects (ConfigMaps; CRs: the custom resource)", yLabel)
	fleets := newPlot("Sharded cache by fleet size (phase 9)", "objects (ConfigMaps)", yLabel)
	var counts []int
	leader, err := rssModes(modes, r, &counts)
	if err != nil {
		return nil, err
	}
	if err := rssLabels(modes, r, &counts); err != nil {
		return nil, err
	}
	if err := rssFleets(fleets, r, leader, &counts); err != nil {
		return nil, err
	}
	if len(counts) == 0 {
		notMeasured(modes, "phase 5, 7 or 10")
		notMeasured(fleets, "phase 9")
		return panels{rssTitle, []*plot.Plot{modes, fleets}}, nil
	}
	slices.Sort(counts)
	counts = slices.Compact(counts)
	var ticks []plot.Tick
	for _, n := range counts {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: thousands(n)})
	}
	// One scale for both panels, so that their heights compare.
	top := max(modes.Y.Max, fleets.Y.Max) * 1.05
	for _, p := range []*plot.Plot{modes, fleets} {
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.X.Min, p.X.Max = 0, float64(counts[len(counts)-1])*1.06
		p.Y.Min, p.Y.Max = 0, top
		p.Y.Tick.Marker = denseTicks{}
		p.Title.TextStyle.Font.Size = vg.Points(13)
	}
	return panels{rssTitle, []*plot.Plot{modes, fleets}}, nil
}

// rssModes draws phases 7 and 5 and returns phase 7's controller-runtime
// leader, the reference the other panel repeats.
func rssModes(p *plot.Plot, r *results, counts *[]int) (leader plotter.XYs, err error) {
	type key struct {
		system, mode string
		replicas     int
	}
	var order []key
	phase7 := map[key]plotter.XYs{}
	var rollout plotter.XYs
	customResources := map[string]plotter.XYs{} // by system
	for _, s := range r.ShardedRuns {
		if s.Kind == benchObjectKind {
			customResources[s.System] = append(customResources[s.System], plotter.XY{X: float64(s.Objects), Y: s.MaxPeakRSS})
			*counts = append(*counts, s.Objects)
			continue
		}
		k := key{s.System, s.CacheMode, s.Replicas}
		if _, ok := phase7[k]; !ok {
			order = append(order, k)
		}
		phase7[k] = append(phase7[k], plotter.XY{X: float64(s.Objects), Y: s.MaxPeakRSS})
		*counts = append(*counts, s.Objects)
		if s.RolloutMaxPeakRSS > 0 {
			rollout = append(rollout, plotter.XY{X: float64(s.Objects), Y: s.RolloutMaxPeakRSS})
		}
	}
	for _, k := range order {
		xys := byX(phase7[k])
		c, shape, name := kshardColor, draw.GlyphDrawer(draw.CircleGlyph{}), fmt.Sprintf("%s %s cache, %d replicas (phase 7)", k.system, k.mode, k.replicas)
		switch {
		case k.system == crName:
			c, name, leader = crColor, fmt.Sprintf("controller-runtime leader, %d replicas (phase 7)", k.replicas), xys
		case k.mode == shardedMode:
			c, shape, name = shardedColor, draw.PyramidGlyph{}, fmt.Sprintf("kshard sharded cache, %d replicas (phase 7)", k.replicas)
		case k.mode == fallbackMode:
			c, shape, name = fallbackColor, draw.BoxGlyph{}, fmt.Sprintf("kshard fallback (gate off), %d replicas (phase 7)", k.replicas)
		}
		if err := series(p, name, xys, c, shape); err != nil {
			return nil, err
		}
	}
	if len(rollout) > 0 {
		if _, err := points(p, "kshard sharded: new processes in a rolling restart (phase 7)", rollout, shardedColor, draw.RingGlyph{}, vg.Points(6)); err != nil {
			return nil, err
		}
	}
	for _, sys := range slices.Sorted(maps.Keys(customResources)) {
		c := crColor
		if sys != crName {
			c = kshardColor
		}
		if _, err := points(p, sys+", CRs, gate on or off (phase 7)", customResources[sys], c, draw.CrossGlyph{}, vg.Points(5)); err != nil {
			return nil, err
		}
	}
	for _, s := range r.Resources {
		c, shape := kshardColor, draw.GlyphDrawer(draw.CircleGlyph{})
		name := fmt.Sprintf("kshard full cache, %d replicas (phase 5)", s.Replicas)
		switch s.System {
		case crName:
			c, shape, name = crColor, draw.RingGlyph{}, fmt.Sprintf("controller-runtime leader, %d replicas (phase 5)", s.Replicas)
		case adapterName:
			c, shape, name = adapterColor, draw.BoxGlyph{}, fmt.Sprintf("adapter (crshard), full cache, %d replicas (phase 5)", s.Replicas)
		}
		if _, err := points(p, name, plotter.XYs{{X: float64(s.Objects), Y: s.MaxPeakRSS}}, c, shape, vg.Points(5)); err != nil {
			return nil, err
		}
		*counts = append(*counts, s.Objects)
	}
	return leader, nil
}

// rssLabels draws phase 10: per layout, the controller-runtime leader's
// and kshard's gate-free sharded cache's largest peak over custom
// resources, the median over the rounds at each object count.
func rssLabels(p *plot.Plot, r *results, counts *[]int) error {
	if r.Labels == nil {
		return nil
	}
	for li, l := range r.Labels.Layouts {
		peaks := map[string]map[int][]float64{} // system → objects → a peak per round
		for _, s := range l.Runs {
			if peaks[s.System] == nil {
				peaks[s.System] = map[int][]float64{}
			}
			peaks[s.System][s.Objects] = append(peaks[s.System][s.Objects], s.MaxPeakRSS)
			*counts = append(*counts, s.Objects)
		}
		where := fmt.Sprintf("over %d ns", l.Namespaces)
		if l.Namespaces <= 1 {
			where = "in 1 ns"
		}
		for _, sys := range slices.Sorted(maps.Keys(peaks)) {
			var xys plotter.XYs
			for _, n := range slices.Sorted(maps.Keys(peaks[sys])) {
				xys = append(xys, plotter.XY{X: float64(n), Y: median(peaks[sys][n])})
			}
			c, shape, name := labelsColor, draw.GlyphDrawer(draw.TriangleGlyph{}), fmt.Sprintf("kshard labels, gate off, CRs %s (phase 10)", where)
			if sys == crName {
				c, shape, name = crColor, draw.TriangleGlyph{}, fmt.Sprintf("controller-runtime leader, CRs %s (phase 10)", where)
			}
			if li > 0 {
				c = darker(c, 0.5)
			}
			if err := series(p, name, xys, c, shape, vg.Points(4), vg.Points(2)); err != nil {
				return err
			}
		}
	}
	return nil
}

// rssFleets draws phase 9's sharded cache, a line per fleet size, beside
// the controller-runtime leader for scale.
func rssFleets(p *plot.Plot, r *results, leader plotter.XYs, counts *[]int) error {
	if len(leader) > 0 {
		if err := series(p, "controller-runtime leader (phase 7), for scale", leader, crColor, draw.CircleGlyph{}, vg.Points(6), vg.Points(3)); err != nil {
			return err
		}
	}
	if r.Scale == nil {
		return nil
	}
	var sizes []int
	byFleet := map[int]plotter.XYs{}
	for _, s := range r.Scale.Runs {
		if s.Failed != "" || s.PeakRSSMax <= 0 {
			continue
		}
		if _, ok := byFleet[s.Replicas]; !ok {
			sizes = append(sizes, s.Replicas)
		}
		byFleet[s.Replicas] = append(byFleet[s.Replicas], plotter.XY{X: float64(s.Objects), Y: s.PeakRSSMax})
		*counts = append(*counts, s.Objects)
	}
	slices.Sort(sizes)
	shapes := []draw.GlyphDrawer{draw.PyramidGlyph{}, draw.BoxGlyph{}, draw.CircleGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}}
	for i, n := range sizes {
		c := darker(shardedColor, float64(i)/float64(max(len(sizes)-1, 1)))
		if err := series(p, fmt.Sprintf("kshard sharded cache, %d replicas", n), byX(byFleet[n]), c, shapes[i%len(shapes)]); err != nil {
			return err
		}
	}
	return nil
}

// byX sorts points by x, so a line through them runs left to right.
func byX(xys plotter.XYs) plotter.XYs {
	slices.SortFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
	return xys
}

// darker mixes c with black: f = 0 leaves it, 1 is much darker.
func darker(c color.RGBA, f float64) color.RGBA {
	f = 1 - 0.65*f
	return color.RGBA{R: uint8(float64(c.R) * f), G: uint8(float64(c.G) * f), B: uint8(float64(c.B) * f), A: c.A}
}
