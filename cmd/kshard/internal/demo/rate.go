package demo

import "time"

// rateWindow is how far back the reconciles/s column looks: long enough to
// smooth scrape jitter, short enough that the rate falls to 0 within a few
// frames once reconciling stops.
const rateWindow = 5 * time.Second

// rateMeter turns samples of a counter into a rate over a sliding window.
type rateMeter struct {
	window  time.Duration
	samples []point // oldest first, all within window of the newest
}

type point struct {
	at    time.Time
	value float64
}

// add records the counter's value at a moment, dropping samples that fell
// out of the window. A counter that went down (the process restarted)
// starts the window afresh.
func (m *rateMeter) add(at time.Time, value float64) {
	if n := len(m.samples); n > 0 && value < m.samples[n-1].value {
		m.samples = m.samples[:0]
	}
	m.samples = append(m.samples, point{at, value})
	cut := 0
	for cut < len(m.samples)-1 && at.Sub(m.samples[cut].at) > m.window {
		cut++
	}
	m.samples = m.samples[cut:]
}

// rate is the counter's increase per second over the samples within the
// window as of now (0 with fewer than two). Samples older than the window
// no longer count even when no new one arrived, so a stopped replica or an
// idle counter reads 0 rather than its last busy rate.
func (m *rateMeter) rate(now time.Time) float64 {
	var first, last *point
	for i := range m.samples {
		p := &m.samples[i]
		if now.Sub(p.at) > m.window {
			continue
		}
		if first == nil {
			first = p
		}
		last = p
	}
	if first == nil || last == first {
		return 0
	}
	return (last.value - first.value) / last.at.Sub(first.at).Seconds()
}
