package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// sample is what one scrape of a replica's /metrics says.
type sample struct {
	at         time.Time
	reconciles float64 // controller_runtime_reconcile_total{controller="widget"}, all results
	queue      float64 // workqueue_depth{name="widget"}
	active     float64 // kshard_partitions{state="active"}
	claimed    float64 // kshard_partitions{state="claimed"}
}

// scrapeTimeout bounds one scrape: a replica that does not answer shows as
// unknown instead of stalling the table.
const scrapeTimeout = 500 * time.Millisecond

// scrape reads a replica's metrics.
func scrape(ctx context.Context, client *http.Client, addr string) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return sample{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return sample{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads the Prometheus text format.
func parseMetrics(r io.Reader) (sample, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return sample{}, err
	}
	s := sample{at: time.Now()}
	s.reconciles = sum(families["controller_runtime_reconcile_total"], "controller", "widget")
	s.queue = sum(families["workqueue_depth"], "name", "widget")
	s.active = sum(families["kshard_partitions"], "state", "active")
	s.claimed = sum(families["kshard_partitions"], "state", "claimed")
	return s, nil
}

// sum adds the counter or gauge values of the family's series whose label
// has value.
func sum(f *dto.MetricFamily, label, value string) float64 {
	if f == nil {
		return 0
	}
	var total float64
	for _, m := range f.GetMetric() {
		match := false
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				match = true
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Untyped != nil:
			total += m.Untyped.GetValue()
		}
	}
	return total
}

// screen draws the live table. On a terminal it redraws the table in place
// (cursor up, clear); elsewhere (CI, a pipe) it prints plain tables, every
// plainEvery and whenever asked to force one, with no escape sequences.
type screen struct {
	w          io.Writer
	tty        bool
	plainEvery time.Duration

	last      []string // the frame last drawn
	drawn     int      // lines of it on a terminal, below the cursor's home
	lastPlain time.Time
}

// frame shows lines as the current table.
func (s *screen) frame(lines []string, force bool) {
	s.last = lines
	if !s.tty {
		if !force && time.Since(s.lastPlain) < s.plainEvery {
			return
		}
		s.lastPlain = time.Now()
		fmt.Fprintln(s.w, strings.Join(lines, "\n"))
		fmt.Fprintln(s.w)
		return
	}
	var b strings.Builder
	if s.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", s.drawn)
	}
	for _, l := range lines {
		b.WriteString("\x1b[2K")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString("\x1b[J") // a shorter frame leaves no stale lines
	io.WriteString(s.w, b.String())
	s.drawn = len(lines)
}

// say prints a line above the table, which stays below it.
func (s *screen) say(format string, args ...any) {
	if !s.tty {
		fmt.Fprintf(s.w, format+"\n", args...)
		return
	}
	if s.drawn > 0 {
		fmt.Fprintf(s.w, "\x1b[%dA\x1b[J", s.drawn)
		s.drawn = 0
	}
	fmt.Fprintf(s.w, format+"\n", args...)
	if s.last != nil {
		s.frame(s.last, true)
	}
}

// release leaves the last frame on the terminal; later output goes below.
func (s *screen) release() { s.drawn, s.last = 0, nil }
