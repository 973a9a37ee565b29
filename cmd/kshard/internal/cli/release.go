package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
)

func releaseCommand() *command {
	return &command{
		name:     "release",
		synopsis: "remove the member finalizer from the Leases of replicas that are gone",
		globals:  true,
		help: func(prog string) string {
			return fmt.Sprintf(`Remove the finalizer kshard.io/member from member Leases whose replicas are gone.

Usage:
  %[1]s release --ring NAME <identity>... [--lease-namespace NS] [flags]
  %[1]s release --ring NAME --all [--lease-namespace NS] [flags]

Use it when no replica of a ring is left to remove the finalizer itself:
all were scaled away or deleted after crashing, or the namespace was
deleted after its pods crashed, and a member Lease (and with it the
namespace) stays terminating for ever. For the Lease <ring>-<identity> of
each identity given, or with --all each Lease labelled kshard.io/ring=<ring>,
it waits for a sign of life first: it reads the Lease, waits --wait (by
default the longest spec.leaseDurationSeconds of those Leases), reads it
again, and releases it only if its resourceVersion did not change, in one
update conditioned on that resourceVersion that removes the finalizer,
sets state leaving and publishes an empty claim (annotation kshard.io/claim,
label kshard.io/partitions=0). A pending deletion then completes; a Lease not
being deleted stays, released. --force skips the wait: if a holder is in
fact alive, it goes on reconciling its partitions while a new replica,
no longer held back by its Lease, joins and claims them, so that the same
objects are reconciled by two replicas at once.

The Leases are those of --lease-namespace (default: -n, else the context's
namespace); -A does not apply. -o wide prints the same table.

It exits 1 unless every Lease given was released or had nothing to release.
It needs get and update (and list with --all) on leases.coordination.k8s.io
in the namespace.

Examples:
  %[1]s release --lease-namespace operators --ring example-operator example-operator-0 example-operator-2
  %[1]s release -n operators --ring example-operator --all

Flags:
      --all               every member Lease of the ring instead of the identities given
      --wait D            how long to watch the Leases for a change, e.g. 30s
                          (default: their longest spec.leaseDurationSeconds)
      --force             release without waiting (see above for the risk)
%[2]s`, prog, globalFlagsHelp)
		},
		run: runRelease,
	}
}

// Outcomes of release, per Lease: the values of releaseResult.Result.
const (
	releaseReleased  = "released"      // finalizer removed
	releaseNothing   = "nothing-to-do" // no finalizer, or deleted meanwhile
	releaseNotMember = "not-member"    // not labelled as a member of the ring
	releaseNotFound  = "not-found"     // no such Lease
	releaseChanged   = "changed"       // written while waiting: the holder may be alive
	releaseRefused   = "refused"       // the API server refused the update as invalid
)

// releaseResult is what release did to one Lease; the items of `release
// -o json`.
type releaseResult struct {
	Lease   string `json:"lease"`
	Result  string `json:"result"`
	Message string `json:"message"`
}

// ok reports whether the Lease needs nothing more.
func (r releaseResult) ok() bool { return r.Result == releaseReleased || r.Result == releaseNothing }

// releaseJSON is the document `release -o json` (and -o yaml) prints.
type releaseJSON struct {
	// Namespace is the Leases' namespace.
	Namespace string          `json:"namespace"`
	Ring      string          `json:"ring"`
	Leases    []releaseResult `json:"leases"`
}

type releaseOptions struct {
	ring       string
	identities []string // the Leases named, without --all
	all        bool
	force      bool
	wait       time.Duration // 0: the Leases' spec.leaseDurationSeconds
}

func runRelease(e *env, g *globals, args []string) error {
	fs := newFlagSet("release")
	g.register(fs)
	var o releaseOptions
	fs.BoolVar(&o.all, "all", false, "")
	fs.BoolVar(&o.force, "force", false, "")
	fs.Var(durationValue{&o.wait}, "wait", "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	g.noteSet(fs)
	o.ring = g.ring
	switch {
	case o.ring == "":
		return usagef("release needs --ring: the ring whose Leases to release (%s status lists the rings)", e.prog)
	case o.all && len(pos) > 0:
		return usagef("give identities or --all, not both")
	case !o.all && len(pos) == 0:
		return usagef("give the identities of the Leases to release, or --all; e.g. %s release --ring %s %s-0", e.prog, o.ring, o.ring)
	case fs.Changed("wait") && o.wait <= 0:
		return usagef("--wait %s: give a positive duration such as 30s (or --force not to wait)", o.wait)
	case fs.Changed("wait") && o.force:
		return usagef("--wait and --force contradict each other: --force does not wait")
	}
	if err := lease.ValidateRing(o.ring); err != nil {
		return usagef("not a valid ring name: --ring %v", err)
	}
	for _, id := range pos {
		if err := lease.ValidateIdentity(o.ring, id); err != nil {
			return usagef("not a valid identity: %v", err)
		}
		if !slices.Contains(o.identities, id) {
			o.identities = append(o.identities, id)
		}
	}
	if err := g.validate(); err != nil {
		return err
	}
	if g.allNamespaces {
		return refuseAllNamespaces("release", "it releases the Leases of one namespace; give it with --lease-namespace")
	}
	c, err := e.dial(g)
	if err != nil {
		return err
	}
	results, err := release(e, c, o)
	// After an error, the Leases not reached yet have no result.
	results = slices.DeleteFunc(results, func(r releaseResult) bool { return r.Result == "" })
	if len(results) > 0 {
		if werr := writeReleaseResults(e.stdout, g.output, releaseJSON{Namespace: c.leaseNamespace, Ring: o.ring, Leases: results}); err == nil {
			err = werr
		}
	}
	if err != nil {
		return err
	}
	if failed := notOK(results); failed > 0 {
		return fmt.Errorf("%d of %d Lease(s) not released (see above)", failed, len(results))
	}
	return nil
}

// notOK counts the results that need more than the command did.
func notOK[R interface{ ok() bool }](results []R) int {
	n := 0
	for _, r := range results {
		if !r.ok() {
			n++
		}
	}
	return n
}

// dial connects to the cluster the flags name (tests substitute a fake).
func (e *env) dial(g *globals) (*cluster, error) {
	if e.connect != nil {
		return e.connect(g)
	}
	return connect(g)
}

// candidate is a Lease to release, as first read.
type candidate struct {
	index int // in the results
	lease *coordinationv1.Lease
}

// release releases the Leases o names and returns what it did to each, in
// order. An error stops it (the results so far are returned with it).
func release(e *env, c *cluster, o releaseOptions) ([]releaseResult, error) {
	leases := c.client.CoordinationV1().Leases(c.leaseNamespace)
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()

	// First read.
	var first []*coordinationv1.Lease
	var results []releaseResult
	if o.all {
		list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: lease.LabelRing + "=" + o.ring})
		if err != nil {
			return nil, c.releaseAPIError(fmt.Sprintf("listing the Leases of ring %q in namespace %q", o.ring, c.leaseNamespace), "list", err)
		}
		if len(list.Items) == 0 {
			return nil, c.noRingError(ctx, o.ring)
		}
		slices.SortFunc(list.Items, func(a, b coordinationv1.Lease) int { return strings.Compare(a.Name, b.Name) })
		for i := range list.Items {
			first = append(first, &list.Items[i])
			results = append(results, releaseResult{Lease: list.Items[i].Name})
		}
	} else {
		for _, id := range o.identities {
			name := lease.LeaseName(o.ring, id)
			l, err := leases.Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				l = nil
			case err != nil:
				return results, c.releaseAPIError(fmt.Sprintf("reading Lease %q in namespace %q", name, c.leaseNamespace), "get", err)
			}
			first = append(first, l)
			results = append(results, releaseResult{Lease: name})
		}
	}

	var todo []candidate
	var wait time.Duration
	var members *string // the ring's identities, for a Lease not found
	for i, l := range first {
		r := &results[i]
		switch {
		case l == nil:
			r.Result, r.Message = releaseNotFound, fmt.Sprintf("not found in namespace %q", c.leaseNamespace)
			if members == nil {
				members = c.ringIdentities(ctx, o.ring)
			}
			r.Message += "; " + *members
		case l.Labels[lease.LabelRing] != o.ring:
			r.Result = releaseNotMember
			if ring, ok := l.Labels[lease.LabelRing]; ok {
				r.Message = fmt.Sprintf("not a member Lease of ring %q (it has label %s=%s): not touched", o.ring, lease.LabelRing, ring)
			} else {
				r.Message = fmt.Sprintf("not a member Lease of ring %q (it has no label %s): not touched", o.ring, lease.LabelRing)
			}
		case !slices.Contains(l.Finalizers, membership.FinalizerMember):
			r.Result, r.Message = releaseNothing, fmt.Sprintf("has no finalizer %s: nothing to do", membership.FinalizerMember)
		default:
			todo = append(todo, candidate{index: i, lease: l})
			wait = max(wait, leaseDuration(l))
		}
	}
	if len(todo) == 0 {
		return results, nil
	}
	names := make([]string, len(todo))
	for i, t := range todo {
		names[i] = t.lease.Name
	}

	if o.force {
		fmt.Fprintf(e.stderr, "warning: --force: releasing %s without waiting for a sign of life: if a holder is alive, it may go on reconciling its partitions while a new replica joins and claims them\n",
			strings.Join(names, ", "))
	} else {
		why := "the longest spec.leaseDurationSeconds of these Leases"
		if o.wait > 0 {
			if !handoff.Expired(o.wait, wait) {
				fmt.Fprintf(e.stderr, "warning: --wait %s is shorter than the Leases' duration %s: a live holder may not renew within it\n", o.wait, wait)
			}
			wait, why = o.wait, "--wait"
		}
		fmt.Fprintf(e.stderr, "waiting %s (%s) for the holders to renew %s: a Lease that changes meanwhile has a live holder and is not released\n",
			wait, why, strings.Join(names, ", "))
		timer := time.NewTimer(wait)
		<-timer.C

		// Second read: confirm before void, as the replicas do
		// (handoff.JudgeConfirm): the wait proves the holder silent only
		// if nothing was written in between.
		ctx2, cancel2 := context.WithTimeout(context.Background(), commandTimeout)
		defer cancel2()
		ctx = ctx2
		quiet := todo[:0]
		for _, t := range todo {
			r := &results[t.index]
			l, err := leases.Get(ctx, t.lease.Name, metav1.GetOptions{})
			read := handoff.LeaseRead{Found: err == nil}
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return results, c.releaseAPIError(fmt.Sprintf("reading Lease %q in namespace %q again", t.lease.Name, c.leaseNamespace), "get", err)
			default:
				read.UID, read.Version = string(l.UID), l.ResourceVersion
			}
			switch handoff.JudgeConfirm(string(t.lease.UID), t.lease.ResourceVersion, read) {
			case handoff.ConfirmGone:
				r.Result, r.Message = releaseNothing, "deleted while waiting (by its holder or a peer): nothing to do"
			case handoff.ConfirmAlive:
				r.Result, r.Message = releaseChanged, fmt.Sprintf("changed while waiting (resourceVersion %s, then %s): its holder may be alive; not released",
					t.lease.ResourceVersion, l.ResourceVersion)
				if l.UID != t.lease.UID {
					r.Message = "deleted and created again while waiting: its holder is alive; not released"
				}
			case handoff.ConfirmSilent:
				quiet = append(quiet, candidate{index: t.index, lease: l})
			}
		}
		todo = quiet
	}

	for _, t := range todo {
		r := &results[t.index]
		u, claimNote := released(t.lease)
		out, err := leases.Update(ctx, u, metav1.UpdateOptions{})
		switch {
		case apierrors.IsNotFound(err):
			r.Result, r.Message = releaseNothing, "deleted meanwhile (by its holder or a peer): nothing to do"
			continue
		case apierrors.IsConflict(err):
			r.Result, r.Message = releaseChanged, fmt.Sprintf("changed since resourceVersion %s was read: its holder may be alive; not released", t.lease.ResourceVersion)
			continue
		case apierrors.IsInvalid(err):
			r.Result, r.Message = releaseRefused, fmt.Sprintf("the API server refused the update: %s", oneLine(err.Error()))
			continue
		case err != nil:
			return results, c.releaseAPIError(fmt.Sprintf("updating Lease %q in namespace %q", t.lease.Name, c.leaseNamespace), "update", err)
		}
		r.Result = releaseReleased
		r.Message = fmt.Sprintf("finalizer %s removed%s", membership.FinalizerMember, claimNote)
		switch {
		case t.lease.DeletionTimestamp != nil && len(u.Finalizers) > 0:
			r.Message += fmt.Sprintf("; its deletion still waits for the finalizers %s", strings.Join(u.Finalizers, ", "))
		case t.lease.DeletionTimestamp != nil:
			r.Message += "; its deletion completes"
		case out != nil && out.DeletionTimestamp == nil:
			r.Message += fmt.Sprintf("; not being deleted, it stays (kubectl delete lease %s -n %s removes it)", t.lease.Name, c.leaseNamespace)
		}
	}
	return results, nil
}

// ringIdentities says which identities ring has in the namespace, best
// effort, for a Lease not found.
func (c *cluster) ringIdentities(ctx context.Context, ring string) *string {
	var s string
	list, err := c.client.CoordinationV1().Leases(c.leaseNamespace).List(ctx, metav1.ListOptions{LabelSelector: lease.LabelRing + "=" + ring})
	switch {
	case err != nil:
		s = "could not list the ring's Leases: " + oneLine(err.Error())
	case len(list.Items) == 0:
		s = fmt.Sprintf("ring %q has no Lease there", ring)
	default:
		var ids []string
		for _, l := range list.Items {
			if id, ok := strings.CutPrefix(l.Name, ring+"-"); ok {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		s = fmt.Sprintf("the identities of ring %q there: %s", ring, strings.Join(ids, ", "))
	}
	return &s
}

// released returns l as membership.Released writes it, with an empty claim over
// the partition count of its own claim, and says what it did to the claim.
func released(l *coordinationv1.Lease) (*coordinationv1.Lease, string) {
	text, ok := l.Annotations[membership.AnnotationClaim]
	if !ok {
		return membership.Released(l, 0), ""
	}
	p, ok := membership.ClaimPartitions(text)
	if !ok {
		return membership.Released(l, 0), fmt.Sprintf(", claim annotation %s left as it was (it does not decode)", membership.AnnotationClaim)
	}
	return membership.Released(l, p), ", claim emptied"
}

// leaseDuration is l's spec.leaseDurationSeconds, or kshard's default.
func leaseDuration(l *coordinationv1.Lease) time.Duration {
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		return time.Duration(*d) * time.Second
	}
	return shard.DefaultLeaseDuration // a Lease that states none; kshard always writes one
}

// releaseAPIError is apiError for release, whose RBAC needs differ from
// the read-only commands'.
func (c *cluster) releaseAPIError(what, verb string, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s: forbidden for this user: it needs %s on leases.coordination.k8s.io in namespace %q (release needs get and update, and list with --all; check: kubectl auth can-i %s leases -n %s)",
			what, verb, c.leaseNamespace, verb, c.leaseNamespace)
	}
	return c.apiError(what, err)
}

func writeReleaseResults(w io.Writer, output string, doc releaseJSON) error {
	if output == outputJSON || output == outputYAML {
		return writeDoc(w, output, doc)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEASE\tRESULT\tDETAIL")
	for _, r := range doc.Leases {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Lease, r.Result, r.Message)
	}
	return tw.Flush()
}
