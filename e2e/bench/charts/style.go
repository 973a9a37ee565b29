package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The bench's system names (e2e/bench: baselineName, nativeName,
// adapterName) and cache modes.
const (
	crName       = "controller-runtime"
	kshardName   = "kshard"
	adapterName  = "adapter"
	shardedMode  = "sharded"
	fallbackMode = "fallback"
	labelsMode   = "labels"
	// benchObjectKind is the bench's custom resource (shardedRun.Kind).
	benchObjectKind = "BenchObject"
)

// Each colour means one system or cache mode in every chart.
var (
	crColor       = color.RGBA{R: 100, G: 100, B: 100, A: 255}
	kshardColor   = color.RGBA{R: 31, G: 119, B: 180, A: 255} // full cache
	adapterColor  = color.RGBA{R: 44, G: 160, B: 44, A: 255}
	shardedColor  = color.RGBA{R: 230, G: 115, B: 0, A: 255}
	fallbackColor = color.RGBA{R: 148, G: 103, B: 189, A: 255}
	labelsColor   = color.RGBA{R: 23, G: 160, B: 175, A: 255} // the gate-free sharded cache
	idealColor    = color.RGBA{R: 200, G: 30, B: 30, A: 255}
	gridColor     = color.Gray{Y: 225}
)

// Every chart is drawn at this size; at 120 dpi a PNG is 1200 × 720
// pixels, sharp on a high-density screen and a few tens of KiB.
const (
	chartWidth  = 10 * vg.Inch
	chartHeight = 6 * vg.Inch
	chartDPI    = 120
)

func init() {
	// Sans-serif reads better than plot's default serif at chart sizes.
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
}

// newPlot is a plot with a title, axis labels (with units), a light grid
// and the legend in the top-left corner, where rising data leaves room.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(15)
	p.Title.Padding = vg.Points(10)
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(12)
		a.Tick.Label.Font.Size = vg.Points(11)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(10.5)
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), -vg.Points(6)
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = gridColor, gridColor
	p.Add(grid)
	return p
}

// notMeasured says in the title that results.json lacks the chart's
// phases: the PNG RESULTS.md links to still exists and tells why it is
// empty.
func notMeasured(p *plot.Plot, phases string) {
	p.Title.Text += fmt.Sprintf(" — not measured (no %s in results.json)", phases)
}

// series adds a line through xys with a glyph at each point, under name in
// the legend; dashes (in points) draw a dashed line, none a solid one.
func series(p *plot.Plot, name string, xys plotter.XYs, c color.Color, shape draw.GlyphDrawer, dashes ...vg.Length) error {
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	l.Color, l.Width, l.Dashes = c, vg.Points(1.8), dashes
	s.Color, s.Shape, s.Radius = c, shape, vg.Points(4)
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return nil
}

// points adds glyphs at xys without a line, under name in the legend.
func points(p *plot.Plot, name string, xys plotter.XYs, c color.Color, shape draw.GlyphDrawer, radius vg.Length) (*plotter.Scatter, error) {
	s, err := plotter.NewScatter(xys)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s.Color, s.Shape, s.Radius = c, shape, radius
	p.Add(s)
	if name != "" {
		p.Legend.Add(name, s)
	}
	return s, nil
}

// rangeBars draws vertical bars from lo to hi at each x.
func rangeBars(p *plot.Plot, x, lo, hi []float64, c color.Color) error {
	type bars struct {
		plotter.XYs
		plotter.YErrors
	}
	b := bars{make(plotter.XYs, len(x)), make(plotter.YErrors, len(x))}
	for i := range x {
		mid := (lo[i] + hi[i]) / 2
		b.XYs[i] = plotter.XY{X: x[i], Y: mid}
		b.YErrors[i].Low, b.YErrors[i].High = mid-lo[i], hi[i]-mid
	}
	e, err := plotter.NewYErrorBars(b)
	if err != nil {
		return err
	}
	e.Color, e.Width, e.CapWidth = c, vg.Points(1.2), vg.Points(7)
	p.Add(e)
	return nil
}

// figure is what one PNG shows: a plot, or panels.
type figure interface{ Draw(draw.Canvas) }

// panels are plots side by side under one title, their axes aligned.
type panels struct {
	title string
	plots []*plot.Plot
}

func (ps panels) Draw(c draw.Canvas) {
	if ps.title != "" && len(ps.plots) > 0 {
		sty := ps.plots[0].Title.TextStyle
		sty.Font.Size = vg.Points(15)
		c.FillText(sty, vg.Point{X: c.Center().X, Y: c.Max.Y}, ps.title)
		c.Max.Y -= sty.Rectangle(ps.title).Size().Y + vg.Points(10)
	}
	tiles := draw.Tiles{Rows: 1, Cols: len(ps.plots), PadX: vg.Points(24), PadRight: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{ps.plots}, tiles, c)
	for i, p := range ps.plots {
		p.Draw(canvases[0][i])
	}
}

// annotate writes each text beside its point, to the right of it or to the
// left.
func annotate(p *plot.Plot, xys plotter.XYs, texts []string, c color.Color, right bool) error {
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
	if err != nil {
		return err
	}
	align, dx := draw.XRight, -vg.Points(14)
	if right {
		align, dx = draw.XLeft, vg.Points(14)
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Font = font.From(plot.DefaultFont, vg.Points(10.5))
		l.TextStyle[i].Color, l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = c, align, draw.YCenter
	}
	l.Offset = vg.Point{X: dx}
	p.Add(l)
	return nil
}

// savePNG draws f into a PNG file at path.
func savePNG(f figure, path string) (err error) {
	c := vgimg.NewWith(vgimg.UseWH(chartWidth, chartHeight), vgimg.UseDPI(chartDPI))
	f.Draw(draw.New(c))
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = vgimg.PngCanvas{Canvas: c}.WriteTo(out)
	return err
}

// thousands renders n with thousands separators: 100000 → "100,000".
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// denseTicks labels about eight round values (1, 2, 2.5 or 5 × a power of
// ten apart) over an axis: plot's default labels only three or four.
type denseTicks struct{}

func (denseTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', 4, 64)}}
	}
	raw := (hi - lo) / 8
	unit := math.Pow(10, math.Floor(math.Log10(raw)))
	step := unit * 10
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*unit >= raw {
			step = m * unit
			break
		}
	}
	digits := max(0, 1-int(math.Floor(math.Log10(step)))) // 2.5 needs one more than 2
	var ticks []plot.Tick
	for i := math.Ceil(lo / step); i*step <= hi+step*1e-9; i++ {
		label := strconv.FormatFloat(i*step, 'f', digits, 64)
		if strings.Contains(label, ".") {
			label = strings.TrimRight(strings.TrimRight(label, "0"), ".")
		}
		ticks = append(ticks, plot.Tick{Value: i * step, Label: label})
	}
	return ticks
}
