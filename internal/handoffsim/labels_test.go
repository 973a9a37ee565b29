package handoffsim

import (
	"strings"
	"testing"
)

// The end-of-seed check that every object is in its owner's cache can fail:
// after a clean seed, an object taken out of the views of the process its
// partition is active on is reported.
func TestCheckLabelsCachedFindsAMissingObject(t *testing.T) {
	opts := Options{Labels: true, LabelFixes: AllLabelFixes}.withDefaults()
	for seed := range uint64(20) {
		w := newWorld(seed, opts)
		w.run()
		w.checkLabelsSettled()
		if w.violation != "" {
			t.Fatalf("seed %d: %s", seed, w.violation)
		}
		for id, o := range w.lab.objs {
			p := w.runningBy[o.part]
			if p == nil || !p.seesObject(id) {
				continue
			}
			lc := p.pcache.labels
			for _, s := range lc.segs {
				if s != nil {
					s.store.del(id)
				}
			}
			if v := p.speaker(); v != nil {
				v.store.del(id)
			}
			delete(lc.pending, id)
			w.checkLabelsCached()
			if !strings.Contains(w.violation, "where its partition is active, does not cache it") {
				t.Fatalf("seed %d: object %d taken out of %s's views: violation %q, want it not cached", seed, id, p, w.violation)
			}
			t.Logf("seed %d: %s", seed, w.violation)
			return
		}
	}
	t.Fatal("no seed of 20 ended with an object in its owner's cache")
}
