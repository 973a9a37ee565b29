package main

import (
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// handoffRow is one rolling restart's update → reconcile delays.
type handoffRow struct {
	label string
	c     color.Color
	d     delays
}

// handoffRows lists every rolling restart in results.json, top to bottom:
// phase 3's per system, phase 8's per cache mode, phase 9's per fleet,
// phase 10's (the gate-free sharded cache on custom resources).
func handoffRows(r *results) []handoffRow {
	var rows []handoffRow
	for _, h := range r.Handoff {
		if h.Rollout.Updates == 0 {
			continue
		}
		c, name := kshardColor, "kshard (full cache)"
		switch h.System {
		case crName:
			c, name = crColor, "controller-runtime"
		case adapterName:
			c, name = adapterColor, "adapter (crshard)"
		}
		rows = append(rows, handoffRow{fmt.Sprintf("phase 3: %s, %d replicas", name, h.Replicas), c, h.Rollout})
	}
	for _, s := range r.ShardedHandoff {
		if s.Handoff.Rollout.Updates == 0 {
			continue
		}
		c := shardedColor
		if s.CacheMode == fallbackMode {
			c = fallbackColor
		}
		rows = append(rows, handoffRow{fmt.Sprintf("phase 8: kshard %s cache, %d replicas", s.CacheMode, s.Handoff.Replicas), c, s.Handoff.Rollout})
	}
	if r.Scale != nil {
		for _, s := range r.Scale.Runs {
			if s.Failed != "" || s.Rollout.Updates == 0 {
				continue
			}
			rows = append(rows, handoffRow{fmt.Sprintf("phase 9: kshard sharded, %d replicas, %s objects", s.Replicas, thousands(s.Objects)), shardedColor, s.Rollout})
		}
	}
	if r.Labels != nil {
		for _, l := range r.Labels.Layouts {
			if h := l.Handoff; h != nil && h.Rollout.Updates > 0 {
				rows = append(rows, handoffRow{fmt.Sprintf("phase 10: kshard %s cache, custom resources, %d replicas", labelsMode, h.Replicas), labelsColor, h.Rollout})
			}
		}
	}
	for i := range rows {
		rows[i].label += fmt.Sprintf(" (%s updates)", thousands(rows[i].d.Updates))
	}
	return rows
}

// handoffChart draws, per rolling restart, the delay from an update to its
// reconcile: p50, p99 and max, and every percentile where results.json
// holds them (runs from before the bench recorded them have only the three).
func handoffChart(r *results) (*plot.Plot, error) {
	p := newPlot("Update → reconcile delay during rolling restarts (each replica restarted in turn, under a steady writer)", "delay from an update to its reconcile (seconds, log scale)", "")
	rows := handoffRows(r)
	if len(rows) == 0 {
		notMeasured(p, "phase 3, 8, 9 or 10")
		return p, nil
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	names := make([]string, len(rows))
	anyPercentiles := false
	for i, row := range rows {
		y := float64(len(rows) - 1 - i) // the first row on top
		names[len(rows)-1-i] = row.label
		d := row.d
		from := d.P50
		if len(d.Percentiles) > 0 {
			anyPercentiles = true
			from = d.Percentiles[0]
			xys := make(plotter.XYs, len(d.Percentiles))
			for j, v := range d.Percentiles {
				xys[j] = plotter.XY{X: logX(v), Y: y}
			}
			if _, err := points(p, "", xys, lighter(row.c), draw.CircleGlyph{}, vg.Points(2.2)); err != nil {
				return nil, err
			}
		}
		lo, hi = min(lo, logX(from)), max(hi, logX(d.Max))
		span, err := plotter.NewLine(plotter.XYs{{X: logX(from), Y: y}, {X: logX(d.Max), Y: y}})
		if err != nil {
			return nil, err
		}
		span.Color, span.Width = row.c, vg.Points(1)
		p.Add(span)
		for _, m := range []struct {
			v     float64
			shape draw.GlyphDrawer
		}{{d.P50, draw.CircleGlyph{}}, {d.P99, draw.TriangleGlyph{}}, {d.Max, draw.CrossGlyph{}}} {
			if _, err := points(p, "", plotter.XYs{{X: logX(m.v), Y: y}}, row.c, m.shape, vg.Points(5)); err != nil {
				return nil, err
			}
		}
	}
	// The legend's glyphs are black: colour names the system, as in the
	// other charts, and shape names the statistic.
	type mark struct {
		name   string
		shape  draw.GlyphDrawer
		radius vg.Length
	}
	legend := []mark{{"p50", draw.CircleGlyph{}, 5}, {"p99", draw.TriangleGlyph{}, 5}, {"max", draw.CrossGlyph{}, 5}}
	if anyPercentiles {
		legend = append(legend, mark{"every percentile, 1st to 100th", draw.CircleGlyph{}, 2.2})
	}
	for _, l := range legend {
		s, err := plotter.NewScatter(plotter.XYs{{}})
		if err != nil {
			return nil, err
		}
		s.Color, s.Shape, s.Radius = color.Black, l.shape, l.radius
		p.Legend.Add(l.name, s)
	}
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Points(8)
	p.NominalY(names...)
	p.Y.Min, p.Y.Max = -0.6, float64(len(rows))-0.4
	p.X.Min, p.X.Max = math.Floor(lo), max(math.Ceil(hi), math.Floor(lo)+1)
	p.X.Tick.Marker = decadeTicks(p.X.Min, p.X.Max)
	return p, nil
}

// logX places a delay on the x axis, which is linear in log10(seconds):
// plot's own log scale centres the axis label on the arithmetic middle of
// the range and pads the plot for it. A delay is never zero, but a 0 in a
// hand-edited file must not break the chart.
func logX(seconds float64) float64 { return math.Log10(max(seconds, 1e-4)) }

// decadeTicks labels each decade from lo to hi (log10 seconds) and marks
// 2×, 3× … 9× between them.
func decadeTicks(lo, hi float64) plot.ConstantTicks {
	var ticks plot.ConstantTicks
	for d := lo; d <= hi; d++ {
		ticks = append(ticks, plot.Tick{Value: d, Label: strconv.FormatFloat(math.Pow(10, d), 'f', -1, 64)})
		for k := 2.0; k < 10 && d < hi; k++ {
			ticks = append(ticks, plot.Tick{Value: d + math.Log10(k)})
		}
	}
	return ticks
}

// lighter mixes c with white, for the marks behind the statistics.
func lighter(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	mix := func(v uint32) uint8 { return uint8(255 - (255-float64(v>>8))*0.45) }
	return color.RGBA{R: mix(r), G: mix(g), B: mix(b), A: 255}
}
