package demo

import (
	"bytes"
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/ringstatus"
)

const metricsText = `# HELP controller_runtime_reconcile_total Total number of reconciliations per controller
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="widget",result="error"} 2
controller_runtime_reconcile_total{controller="widget",result="success"} 80
controller_runtime_reconcile_total{controller="other",result="success"} 1000
# HELP workqueue_depth Current depth of workqueue
# TYPE workqueue_depth gauge
workqueue_depth{controller="widget",name="widget"} 7
# HELP kshard_partitions Partitions by state
# TYPE kshard_partitions gauge
kshard_partitions{state="active"} 90
kshard_partitions{state="claimed"} 91
kshard_partitions{state="target"} 91
`

func TestParseMetrics(t *testing.T) {
	s, err := parseMetrics(strings.NewReader(metricsText))
	if err != nil {
		t.Fatal(err)
	}
	if s.reconciles != 82 || s.queue != 7 || s.active != 90 || s.claimed != 91 {
		t.Errorf("sample = %+v", s)
	}
	if _, err := parseMetrics(strings.NewReader("garbage{")); err == nil {
		t.Error("garbage parsed")
	}
	s, err = parseMetrics(strings.NewReader(""))
	if err != nil || s.reconciles != 0 {
		t.Errorf("empty: %+v, %v", s, err)
	}
}

func TestScreenPlainHasNoEscapes(t *testing.T) {
	var b bytes.Buffer
	s := &screen{w: &b, plainEvery: time.Hour}
	s.frame([]string{"table 1"}, true)
	s.frame([]string{"table 2"}, false) // within plainEvery: not printed
	s.say("hello %d", 1)
	s.frame([]string{"table 3"}, true)
	got := b.String()
	if strings.Contains(got, "\x1b") {
		t.Errorf("plain output has escape sequences: %q", got)
	}
	if got != "table 1\n\nhello 1\ntable 3\n\n" {
		t.Errorf("plain output = %q", got)
	}
}

func TestScreenTerminalRedraws(t *testing.T) {
	var b bytes.Buffer
	s := &screen{w: &b, tty: true}
	s.frame([]string{"a", "b"}, false)
	s.frame([]string{"c"}, false)
	if got := b.String(); !strings.Contains(got, "\x1b[2A") || !strings.HasSuffix(got, "\x1b[2Kc\n\x1b[J") {
		t.Errorf("terminal output = %q", got)
	}
	b.Reset()
	s.say("msg")
	if got := b.String(); got != "\x1b[1A\x1b[Jmsg\n\x1b[2Kc\n\x1b[J" {
		t.Errorf("say = %q", got)
	}
}

func TestAlign(t *testing.T) {
	got := align([][]string{{"A", "BB"}, {"ccc", "d"}})
	if strings.Join(got, "|") != "A    BB|ccc  d" {
		t.Errorf("align = %q", got)
	}
}

func TestLeaseWatchFiresOnTheDecidingChange(t *testing.T) {
	var w leaseWatch
	ready := false
	fired := w.arm(func() bool { return ready })
	w.changed()
	select {
	case <-fired:
		t.Fatal("fired before the condition held")
	default:
	}
	ready = true
	before := time.Now()
	w.changed()
	select {
	case <-fired:
	default:
		t.Fatal("did not fire")
	}
	if w.firedAt().Before(before) {
		t.Error("firedAt is before the deciding change")
	}
	select {
	case <-w.changes():
	default:
		t.Error("changes() was not notified")
	}
	w.changed() // disarmed: must not close fired twice
}

// servingLine is the line a replica logs once its metrics server is bound.
const servingLine = `{"msg":"serving","server":"metrics","address":"[::]:40001"}`

// shFleet runs replicas as shell loops that exit 0 on SIGTERM, or ignore it.
// Each logs a serving line once its trap is installed, so a SIGTERM sent
// after start returns is handled (or ignored) rather than fatal.
func shFleet(t *testing.T, trap string) *fleet {
	script := trap + "; echo '" + servingLine + "'; while :; do sleep 0.05; done"
	return &fleet{executable: "/bin/sh", baseArgs: []string{"-c", script, "sh"}, logDir: t.TempDir()}
}

func TestFleetStopsGracefully(t *testing.T) {
	f := shFleet(t, `trap 'exit 0' TERM`)
	for _, id := range []string{"r-0", "r-1"} {
		r, err := f.start(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.metricsAddr != "127.0.0.1:40001" {
			t.Errorf("%s: metrics address %q, want the logged one on 127.0.0.1", id, r.metricsAddr)
		}
	}
	f.stopAll(time.Minute, nil)
	for _, r := range f.list() {
		if r.running() || r.exitStatus() != "exited 0" {
			t.Errorf("%s: %s", r.identity, r.exitStatus())
		}
	}
}

func TestFleetKillsAfterGrace(t *testing.T) {
	f := shFleet(t, `trap '' TERM`)
	r, err := f.start(context.Background(), "stubborn")
	if err != nil {
		t.Fatal(err)
	}
	hurry := make(chan struct{})
	close(hurry)
	f.stopAll(time.Minute, hurry)
	if got := r.exitStatus(); got != "killed by "+syscall.SIGKILL.String() {
		t.Errorf("exit = %s", got)
	}
}

func TestFleetStartFailsWhenReplicaExitsUnbound(t *testing.T) {
	f := &fleet{executable: "/bin/sh", baseArgs: []string{"-c", "echo no API server; exit 1", "sh"}, logDir: t.TempDir()}
	_, err := f.start(context.Background(), "r-0")
	if err == nil || !strings.Contains(err.Error(), "exited 1") || !strings.Contains(err.Error(), "no API server") {
		t.Errorf("got %v, want an error naming the exit and quoting the log", err)
	}
	f.stopAll(time.Minute, nil)
}

func TestCachesAgree(t *testing.T) {
	for _, tc := range []struct {
		mode     string
		cached   map[string]int
		replicas int
		want     bool
	}{
		{CacheLabels, map[string]int{"a": 40, "b": 60}, 2, true},
		{CacheLabels, map[string]int{"a": 40, "b": 59}, 2, false},   // one object not (yet) cached
		{CacheLabels, map[string]int{"a": 100, "b": 100}, 2, false}, // full caches under labels
		{CacheLabels, map[string]int{"a": 100, "b": 0}, 2, false},   // b holds nothing yet
		{CacheLabels, map[string]int{"a": 100}, 2, false},           // b published nothing
		{CacheFull, map[string]int{"a": 100, "b": 100}, 2, true},
		{CacheFull, map[string]int{"a": 100, "b": 50}, 2, false},
		{CacheFull, map[string]int{}, 0, false},
	} {
		if got := cachesAgree(tc.mode, tc.cached, tc.replicas, 100); got != tc.want {
			t.Errorf("%s %v of %d replicas: %v, want %v", tc.mode, tc.cached, tc.replicas, got, tc.want)
		}
	}
}

// memberLease is a member Lease of ring example-operator in state state,
// claiming claim; renewed is how long ago it was renewed.
func memberLease(id, state string, claim shard.PartitionSet, renewed time.Duration) coordinationv1.Lease {
	holder, secs := id, int32(10)
	renew := metav1.NewMicroTime(time.Now().Add(-renewed))
	return coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: lease.LeaseName(Ring, id), Namespace: Namespace,
			Labels: map[string]string{lease.LabelRing: Ring, membership.LabelState: state},
			Annotations: map[string]string{membership.AnnotationClaim: membership.EncodeClaim(claim), membership.AnnotationIncarnation: "i-" + id,
				membership.AnnotationGeneration: "1", membership.AnnotationParams: shard.Config{}.Fingerprint()}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &renew},
	}
}

// The table's partition columns come from one read of the Leases: mid-
// handoff, the old owner still claims what the new one claimed, and both
// show those partitions as HANDOFF, so that CLAIMED - HANDOFF never adds
// up to more than the ring has. An expired member's claim is no handoff.
func TestPartitionColumns(t *testing.T) {
	all := shard.FullPartitionSet(shard.DefaultPartitions)
	moving := shard.NewPartitionSet(shard.DefaultPartitions, all.Slice()[:90]...)
	gone := shard.NewPartitionSet(shard.DefaultPartitions, 200, 201)
	rings := ringstatus.Analyze(Namespace, []coordinationv1.Lease{
		memberLease("example-operator-0", "active", all, time.Second),
		memberLease("example-operator-1", "active", moving, time.Second),
		memberLease("example-operator-2", "active", gone, time.Hour),
	}, time.Now())
	if len(rings) != 1 {
		t.Fatalf("rings %+v", rings)
	}
	got := partitionColumns(rings[0])
	want := map[string]partitionCounts{
		"example-operator-0": {claimed: 271, handoff: 90},
		"example-operator-1": {claimed: 90, handoff: 90},
		"example-operator-2": {claimed: 2, handoff: 0},
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %+v, want %+v", id, got[id], w)
		}
	}
	sole := 0
	for id, c := range got {
		if id != "example-operator-2" {
			sole += c.claimed - c.handoff
		}
	}
	if sole > shard.DefaultPartitions {
		t.Errorf("live claims held alone add up to %d, over %d partitions", sole, shard.DefaultPartitions)
	}
}
