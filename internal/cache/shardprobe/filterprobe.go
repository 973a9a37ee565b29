package shardprobe

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kshard/kshard/shard"
)

// Filtering reports whether the API server filters resource gvr
// by shard selector, in namespace ("" for all namespaces or a
// cluster-scoped resource), partitioned by rp (at least two partitions).
// Where the server echoes ShardInfo (built-in kinds) one LIST decides, as
// Selector does. Where it echoes none (custom resources in
// Kubernetes 1.36, or a server without the gate) it tests what the server
// returns about one existing object, the witness, with LISTs of limit 1,
// so a probe costs at most 1 + 3×3 requests whatever the resource holds
// (usually 2 to 4):
//
//  1. a LIST selecting partition 0. An exact echo: filtered; another
//     selector echoed: not filtered; an object outside partition 0: not
//     filtered (no filtering server returns one). An object inside it is
//     the witness.
//  2. with no object yet, a LIST without selector finds the witness. None:
//     the resource is empty; Retry (nothing to test on, and a fallback
//     lists nothing while the resource is empty).
//  3. a LIST of the witness by name (field selector metadata.name) with a
//     selector of one partition that is not the witness's. The witness, or
//     any object outside the selector: not filtered. Nothing: step 4.
//  4. the same LIST with a selector of the witness's own partition. The
//     witness, same UID: filtered. It existed when step 1 or 2 listed it
//     and still exists now, and a UID never comes back once deleted, so it
//     existed when step 3 was served (each LIST without resourceVersion is
//     served at least as fresh as any that completed before it was sent):
//     a server that ignored the selector would have returned it there;
//     and step 4 shows this server answers that field selector. Nothing,
//     or another UID: the witness was deleted or replaced meanwhile;
//     undecided: back to step 2, at most three witnesses, then Retry.
//
// The selector of step 3 excludes the witness by construction, so a
// selector that happens to include every object cannot be mistaken for a
// filter. Aggregated APIs get no benefit of the doubt: filtered only when
// the rule proves it. A wrong "filtered" from a server that breaks the
// consistency assumption (replicas behind a load balancer that differ in
// the gate or in freshness) costs memory, never correctness: sharded
// informers check every item and event on the client (Matcher) and
// count the LISTs the server did not filter (Segmented.UnfilteredLists).
//
// Errors are those of Selector, and a refused field selector.
func Filtering(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, namespace string, rp shard.RangePartitioner) (Result, error) {
	if rp.Count() < 2 {
		return Result{}, fmt.Errorf("cache: probing %s with a ring of %d partitions: a probe needs a partition that excludes an object; use the ring's RangePartitioner (at least 2 partitions)", gvr.String(), rp.Count())
	}
	p := newFilterProbe(rp, gvr.GroupResource().String(), namespace)
	for {
		req, ok := p.next()
		if !ok {
			return p.result, nil
		}
		opts := metav1.ListOptions{Limit: 1, ShardSelector: req.matcher.String()}
		if req.name != "" {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", req.name).String()
		}
		list, err := listForProbe(ctx, client, gvr, req.namespace, opts)
		if err != nil {
			return Result{}, err
		}
		p.observe(answerOf(list))
	}
}

// maxWitnesses bounds the witnesses one probe tries before Retry: each
// costs up to three LISTs, and a resource whose objects keep being
// replaced faster than that is probed again later.
const maxWitnesses = 3

// filterProbe is Filtering's decision rule without I/O: next
// names the LIST to send, observe judges its response, so every rule is
// tested on crafted responses.
type filterProbe struct {
	rp        shard.RangePartitioner
	resource  string // for reasons
	namespace string // the probe's scope
	step      probeStep
	witness   probeObject
	partition int // the witness's partition
	witnesses int // witnesses tried
	done      bool
	result    Result
}

type probeStep int

const (
	stepEcho    probeStep = iota // selecting partition 0: an echo or an object outside decides
	stepWitness                  // no selector: find an object to test with
	stepExclude                  // the witness by name, selecting a partition not its own
	stepConfirm                  // the witness by name, selecting its own partition
)

// probeRequest is one LIST of the probe (limit 1): in namespace, of the
// object called name ("" for any), with matcher's selector (none when the
// matcher is the zero value).
type probeRequest struct {
	namespace string
	name      string
	matcher   Matcher
}

// probeAnswer is what the probe reads of a LIST response.
type probeAnswer struct {
	echoed string // ListMeta.ShardInfo.Selector; "" when none (or malformed)
	items  []probeObject
}

type probeObject struct{ namespace, name, uid string }

func (o probeObject) String() string { return shard.KeyOf(o.namespace, o.name) }

func newFilterProbe(rp shard.RangePartitioner, resource, namespace string) *filterProbe {
	return &filterProbe{rp: rp, resource: resource, namespace: namespace}
}

// next returns the LIST to send, or false once the probe has decided
// (result).
func (p *filterProbe) next() (probeRequest, bool) {
	if p.done {
		return probeRequest{}, false
	}
	switch p.step {
	case stepEcho:
		return p.request(p.namespace, "", 0)
	case stepWitness:
		return probeRequest{namespace: p.namespace}, true
	case stepExclude:
		return p.request(p.witness.namespace, p.witness.name, (p.partition+1)%p.rp.Count())
	default: // stepConfirm
		return p.request(p.witness.namespace, p.witness.name, p.partition)
	}
}

// request is a LIST selecting partition part.
func (p *filterProbe) request(namespace, name string, part int) (probeRequest, bool) {
	m, err := NewMatcher(p.rp, shard.NewPartitionSet(p.rp.Count(), part))
	if err != nil { // not for a partition of rp
		p.finish(Result{Reason: fmt.Sprintf("building the probe's shard selector for %s: %v", p.resource, err)})
		return probeRequest{}, false
	}
	return probeRequest{namespace: namespace, name: name, matcher: m}, true
}

// observe judges the response to the LIST next returned last.
func (p *filterProbe) observe(a probeAnswer) {
	req, ok := p.next()
	if !ok {
		return
	}
	switch p.step {
	case stepEcho:
		sel := req.matcher.String()
		switch {
		case a.echoed == sel:
			p.finish(Result{Filtered: true, Echoed: a.echoed})
			return
		case a.echoed != "":
			p.finish(Result{Echoed: a.echoed, Reason: anotherSelectorReason(p.resource, sel, a.echoed)})
			return
		case p.decidedByOutsider(req, a):
			return
		}
		if !p.chooseWitness(a) {
			p.step = stepWitness // nothing in partition 0; maybe elsewhere
		}
	case stepWitness:
		if !p.chooseWitness(a) {
			p.finish(Result{Retry: true, Reason: fmt.Sprintf("no %s exists to test the shard selector on, and the API server echoes no ShardInfo for it: only its answer about an existing object tells whether it filters; listing the kind whole costs nothing while it is empty, and it is probed again at its first object", p.resource)})
		}
	case stepExclude:
		switch {
		case p.decidedByOutsider(req, a):
		case len(a.items) > 0: // in the selected partition: the name was taken again
			p.undecided("was replaced by a namesake")
		default:
			p.step = stepConfirm
		}
	case stepConfirm:
		for _, o := range a.items {
			if o.uid == p.witness.uid {
				p.finish(Result{Filtered: true})
				return
			}
		}
		p.undecided("was deleted or replaced")
	}
}

// decidedByOutsider finishes the probe as not filtered if the response
// holds an object outside the request's selector: a server that filtered
// would not have returned it.
func (p *filterProbe) decidedByOutsider(req probeRequest, a probeAnswer) bool {
	for _, o := range a.items {
		if !req.matcher.Contains(o.namespace, o.uid) {
			p.finish(Result{Reason: fmt.Sprintf("the API server returned %s %s, outside the shard selector sent, and echoed no ShardInfo: it does not filter %s by shard (Kubernetes < 1.36, or feature gate ShardedListAndWatch off)", p.resource, o, p.resource)})
			return true
		}
	}
	return false
}

// chooseWitness takes the response's first object as the witness and moves
// to stepExclude; false when the response holds none.
func (p *filterProbe) chooseWitness(a probeAnswer) bool {
	if len(a.items) == 0 {
		return false
	}
	p.witness, p.witnesses = a.items[0], p.witnesses+1
	part, ok := p.rp.PartitionOfObject(p.witness.namespace, p.witness.uid)
	if !ok {
		p.undecided("has no UID")
		return true
	}
	p.partition, p.step = part, stepExclude
	return true
}

// undecided gives up on the witness, for the reason why: another one, or
// Retry after maxWitnesses.
func (p *filterProbe) undecided(why string) {
	if p.witnesses < maxWitnesses {
		p.step = stepWitness
		return
	}
	p.finish(Result{Retry: true, Reason: fmt.Sprintf("the probe could not decide: %d test objects of %s in a row were deleted, replaced or unusable while probing (the last, %s, %s); probed again at the next object", maxWitnesses, p.resource, p.witness, why)})
}

func (p *filterProbe) finish(r Result) {
	p.done, p.result = true, r
}

// answerOf reads a probe's LIST response. A malformed ShardInfo reads as no
// echo: the objects decide then.
func answerOf(list *unstructured.UnstructuredList) probeAnswer {
	var a probeAnswer
	a.echoed, _, _ = unstructured.NestedString(list.UnstructuredContent(), "metadata", "shardInfo", "selector")
	for i := range list.Items {
		it := &list.Items[i]
		a.items = append(a.items, probeObject{namespace: it.GetNamespace(), name: it.GetName(), uid: string(it.GetUID())})
	}
	return a
}
