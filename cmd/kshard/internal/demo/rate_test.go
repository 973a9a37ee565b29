package demo

import (
	"math"
	"testing"
	"time"
)

func TestRateMeter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	m := &rateMeter{window: 5 * time.Second}
	steps := []struct {
		at    float64 // seconds; a negative value adds no sample
		value float64
		now   float64
		want  float64
	}{
		{0, 0, 0, 0},     // one sample: no rate yet
		{1, 100, 1, 100}, // 100 in 1s
		{2, 300, 2, 150}, // 300 in 2s
		{6, 700, 6, 120}, // the sample at 0 fell out: (700-100)/5 over 1..6
		{7, 700, 7, 80},  // an idle second: (700-300)/5 over 2..7
		{8, 700, 8, 0},   // idle since 6: 6..8 flat
		{-1, 0, 20, 0},   // no new sample, long after: everything fell out of the window
		{21, 10, 21, 0},  // counter reset (restart): starts afresh
		{22, 60, 22, 50}, // and measures from there
	}
	for i, s := range steps {
		if s.at >= 0 {
			m.add(at(s.at), s.value)
		}
		if got := m.rate(at(s.now)); math.Abs(got-s.want) > 1e-9 {
			t.Errorf("step %d (t=%vs): rate %v, want %v", i, s.now, got, s.want)
		}
	}
	if len(m.samples) > 3 {
		t.Errorf("kept %d samples, want only those within the window", len(m.samples))
	}
}
