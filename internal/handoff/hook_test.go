package handoff

import (
	"testing"

	"github.com/kshard/kshard/internal/assign"

	"github.com/kshard/kshard/internal/handoffhook"
	"github.com/kshard/kshard/shard"
)

// The simulation's hooks reach a core only through New: the ring builder
// it passes is the one the core places by, and the reads it gets back are
// the core's; a core built without hooks, or with a nil one, has none.
func TestNewAttachesHooks(t *testing.T) {
	cfg := Config{Identity: "a", Incarnation: "inc-a", Ring: shard.Config{Partitions: 7}}
	built := 0
	h := &handoffhook.Hooks{RingBuilder: func(c shard.Config, members []string, w assign.Weights) (*assign.Ring, error) {
		built++
		return assign.NewWeighted(c, members, w)
	}}
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	if h.Proven == nil || h.Tombstones == nil {
		t.Fatal("New left the hooks' reads unset")
	}
	c.placement.place([]string{"a"}, nil)
	if built != 1 || c.placement.ring == nil {
		t.Fatalf("the hooks' ring builder ran %d times (ring %v), want once", built, c.placement.ring)
	}
	if h.Proven("pod-b", "inc-b") {
		t.Fatal("Proven before any proof")
	}
	c.Terminated(Death{PodUID: "pod-b", Incarnation: "inc-b"})
	if !h.Proven("pod-b", "inc-b") {
		t.Fatal("Proven does not read the core's proofs")
	}
	if ts := h.Tombstones(); len(ts) != 0 {
		t.Fatalf("Tombstones of a fresh core = %v", ts)
	}

	for _, hooks := range [][]*handoffhook.Hooks{nil, {nil}} {
		c, err := New(cfg, hooks...)
		if err != nil {
			t.Fatal(err)
		}
		c.placement.place([]string{"a"}, nil)
		if built != 1 || c.placement.ring == nil {
			t.Fatalf("New(cfg, %v): the ring was not built by assign.NewWeighted alone", hooks)
		}
	}
}
