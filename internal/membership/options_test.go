package membership

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/kshard/kshard/lease"
)

func validOptions() Options {
	return Options{Client: fake.NewClientset(), Namespace: "ns", Ring: "r", Identity: "r-0", Partitions: 271}
}

func TestNewAppliesDefaults(t *testing.T) {
	m, err := New(validOptions())
	if err != nil {
		t.Fatal(err)
	}
	o := m.opts
	if o.LeaseDuration != 10*time.Second || o.RenewPeriod != 2*time.Second ||
		o.RenewDeadline != 10*time.Second*2/3 || o.RenewTimeout != o.LeaseDuration-o.RenewDeadline {
		t.Errorf("timings = %s/%s/%s/%s, want 10s/2s/6.67s/3.33s", o.LeaseDuration, o.RenewPeriod, o.RenewDeadline, o.RenewTimeout)
	}
	if o.Clock == nil || o.Logger.GetSink() == nil {
		t.Error("clock or logger not defaulted")
	}
	if len(o.Incarnation) != 16 {
		t.Errorf("incarnation %q, want 16 random hex digits", o.Incarnation)
	}
	other, _ := New(validOptions())
	if other.Incarnation() == m.Incarnation() {
		t.Error("two Members got the same incarnation")
	}
	if m.Name() != "r-r-0" {
		t.Errorf("lease name %q, want r-r-0", m.Name())
	}
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Options)
		want   string // substring of the error
	}{
		{"no client", func(o *Options) { o.Client = nil }, "Options.Client is required"},
		{"no namespace", func(o *Options) { o.Namespace = "" }, "Options.Namespace"},
		{"bad ring", func(o *Options) { o.Ring = "Ring_1" }, "Options.Ring"},
		{"no identity", func(o *Options) { o.Identity = "" }, "Options.Identity"},
		{"bad identity", func(o *Options) { o.Identity = "Pod 0" }, "use the pod's name"},
		{"name too long", func(o *Options) { o.Identity = strings.Repeat("a", 252) }, "shorten the ring name or the identity"},
		{"bad incarnation", func(o *Options) { o.Incarnation = "not valid!" }, "Options.Incarnation"},
		{"no partitions", func(o *Options) { o.Partitions = 0 }, "Options.Partitions"},
		{"negative lease", func(o *Options) { o.LeaseDuration = -time.Second }, "LeaseDuration (-1s) must be positive"},
		{"deadline ≥ lease", func(o *Options) { o.RenewDeadline = 10 * time.Second }, "RenewDeadline (10s) must be less than LeaseDuration (10s)"},
		{"period ≥ deadline", func(o *Options) { o.RenewPeriod = 7 * time.Second }, "RenewPeriod (7s) must be less than RenewDeadline"},
		{"timeout beyond margin", func(o *Options) { o.RenewTimeout = 4 * time.Second }, "exceeds LeaseDuration − RenewDeadline"},
		{"negative timeout", func(o *Options) { o.RenewTimeout = -1 }, "RenewTimeout (-1ns) must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			tc.mutate(&o)
			_, err := New(o)
			if err == nil {
				t.Fatal("New accepted invalid options")
			}
			if !errors.Is(err, lease.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not wrap ErrInvalidOptions or lacks %q", err, tc.want)
			}
		})
	}
}

func TestNewReportsEveryProblem(t *testing.T) {
	_, err := New(Options{})
	for _, want := range []string{"Client", "Namespace", "Ring", "Identity", "Partitions"} {
		if !strings.Contains(err.Error(), "Options."+want) {
			t.Errorf("error does not mention Options.%s:\n%v", want, err)
		}
	}
	// One prefix for the layer, not one per problem.
	if n := strings.Count(err.Error(), "lease:"); n != 1 || !strings.HasPrefix(err.Error(), "lease: invalid options: ") {
		t.Errorf("error carries the prefix \"lease:\" %d times, want once at the start:\n%v", n, err)
	}
}
