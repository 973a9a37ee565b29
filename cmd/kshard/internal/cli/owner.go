package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"

	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/internal/partitionlabel"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/ringstatus"
)

func ownerCommand() *command {
	return &command{
		name:     "owner",
		synopsis: "which replica reconciles an object, and its partition",
		globals:  true,
		help: func(prog string) string {
			return fmt.Sprintf(`Show which replica of a ring reconciles an object.

Usage:
  %[1]s owner <resource> <name> [-n NS] [--lease-namespace NS] [flags]
  %[1]s owner <resource> <namespace>/<name> [flags]

The object is <name> in namespace -n (default: the context's namespace), as
kubectl names objects, or <namespace>/<name>; a cluster-scoped object is
<name> alone. Its key (namespace/name) hashes to a partition with the same
code the replicas run; the owner is the member the ring assigns that
partition to, computed over the live active members read from the ring's
Leases. Those are in --lease-namespace (default: the namespace -n names,
else the context's); when it is not given and that namespace holds no Lease
of the ring, the one namespace in the cluster that does is used, and the
output names it. "claimed by" lists the live members whose Lease claims the
partition: normally just the owner; during a handoff the previous owner
still claims it while it drains, and the owner activates it only once that
claim is released.

The resource (as kubectl names it: widgets, widget.demo.kshard.io, a short
name) is checked against the API server to tell namespaced from
cluster-scoped objects; the object need not exist.

The key is that of the reconcile request: for a controller whose events on
one object enqueue another (Owns, Watches with a mapping), ask about the
object that is reconciled.

When the object exists, its partition labels are shown too: the labels of
the ring's domain (<ring>.kshard.io/…) that replicas with --cache-mode labels
write once per object, each with the partition it names. Under the ring's
current key that is the partition of the request the object maps to: its
own key's, or its controller owner's for an owned object. A key of other
ring parameters (another partition count, say) is no longer read by the
ring; '%[1]s unlabel' removes it.

-o wide adds the ring's parameters and the owner's Lease. -A does not apply:
owner looks up one object.

Liveness is judged from the Leases' timestamps (see '%[1]s status --help').

Examples:
  %[1]s owner widgets my-widget -n team-a
  %[1]s owner widgets my-widget -n team-a --lease-namespace operators --ring example-operator -o yaml

Flags:
%[2]s`, prog, globalFlagsHelp)
		},
		run: runOwner,
	}
}

// ownerJSON is the document `owner -o json` (and -o yaml) prints. Its
// namespace is the ring's, where its Leases are; the object's namespace is
// the first part of its key.
type ownerJSON struct {
	// Resource is the resolved resource, e.g. "widgets.demo.kshard.io".
	Resource string `json:"resource"`
	// Exists is whether the object exists; absent when it could not be
	// checked (see ExistsError).
	Exists      *bool  `json:"exists,omitempty"`
	ExistsError string `json:"existsError,omitempty"`
	ringstatus.Owner
	// PartitionLabels are the object's labels of the ring's domain, the
	// current key's first; empty when it has none or does not exist.
	PartitionLabels []partitionLabel `json:"partitionLabels,omitempty"`
}

// partitionLabel is one of the ring's partition labels on an object.
type partitionLabel struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// Current: Key is the ring's partition label under its present
	// parameters, the one its replicas read and write.
	Current bool `json:"current"`
	// Partition is the partition Value names under the current key;
	// absent when it names none or the key is not current.
	Partition *int `json:"partition,omitempty"`
}

// partitionLabels picks the ring's partition labels out of an object's
// labels: every key of the ring's domain (<ring>.kshard.io/), the key of
// the ring's parameters first (params, as its Leases carry them), then the
// others sorted.
func partitionLabels(ring, params string, labels map[string]string) []partitionLabel {
	current := ""
	cfg, err := membership.ParseParams(params)
	if err == nil {
		current, _ = shard.PartitionLabelKey(ring, cfg)
	}
	var out []partitionLabel
	for _, key := range slices.Sorted(maps.Keys(labels)) {
		if !isRingLabel(ring, key) {
			continue
		}
		l := partitionLabel{Key: key, Value: labels[key], Current: key == current}
		if l.Current {
			if p, ok := partitionlabel.Parse(l.Value, cfg.WithDefaults().Partitions); ok {
				l.Partition = &p
			}
		}
		out = append(out, l)
	}
	slices.SortStableFunc(out, func(a, b partitionLabel) int {
		switch {
		case a.Current == b.Current:
			return 0
		case a.Current:
			return -1
		}
		return 1
	})
	return out
}

// isRingLabel reports whether key is in ring's label domain,
// <ring>.kshard.io/…, where its partition labels live.
func isRingLabel(ring, key string) bool {
	return strings.HasPrefix(key, ring+"."+partitionlabel.Domain+"/")
}

func runOwner(e *env, g *globals, args []string) error {
	fs := newFlagSet("owner")
	g.register(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	g.noteSet(fs)
	if len(pos) != 2 {
		return usagef("want <resource> <name> (with -n for its namespace) or <resource> <namespace>/<name>, got %d argument(s); e.g. %s owner widgets my-widget -n team-a", len(pos), e.prog)
	}
	resource := pos[0]
	ref, err := parseObjectRef(pos[1])
	if err != nil {
		return err
	}
	if err := g.validate(); err != nil {
		return err
	}
	if g.allNamespaces {
		return refuseAllNamespaces("owner", "it looks up one object; give its namespace with -n")
	}
	if err := ref.checkNamespaceFlags(g); err != nil {
		return err
	}
	c, err := e.dial(g)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()

	// The ring first: reading it is the cheaper request, and without it
	// there is no answer.
	rings, err := c.readRings(ctx, g.ring)
	if err != nil && !c.leaseNamespaceGiven {
		// The Leases' namespace was only defaulted (to the object's): look
		// for the ring in the one namespace that has it.
		if ns := c.findRing(ctx, g.ring); ns != "" {
			c.leaseNamespace = ns
			rings, err = c.readRings(ctx, g.ring)
		}
	}
	if err != nil {
		return err
	}
	gvr, namespaced, err := c.resolveResource(resource)
	if err != nil {
		return err
	}
	gr := gvr.GroupResource().String()
	objNamespace, err := ref.namespaceFor(gr, namespaced, c.namespace)
	if err != nil {
		return err
	}
	if w := ref.leaseNamespaceWarning(g); w != "" {
		fmt.Fprintf(e.stderr, "warning: %s\n", w)
	}
	if len(rings) > 1 {
		names := make([]string, len(rings))
		for i, r := range rings {
			names[i] = r.Name
		}
		return usagef("namespace %q has %d rings (%s): pass --ring", c.leaseNamespace, len(rings), strings.Join(names, ", "))
	}
	owner, err := rings[0].OwnerOf(shard.KeyOf(objNamespace, ref.name))
	if err != nil {
		return err
	}
	out := ownerJSON{Resource: gr, Owner: owner}
	exists, labels, existsErr := c.objectLabels(ctx, gvr, objNamespace, ref.name)
	if existsErr != nil {
		out.ExistsError = existsErr.Error()
	} else {
		out.Exists = &exists
		out.PartitionLabels = partitionLabels(rings[0].Name, rings[0].Params, labels)
	}
	if g.structured() {
		return writeDoc(e.stdout, g.output, out)
	}
	return writeOwnerTable(e.stdout, out, rings[0], g.output == outputWide)
}

// objectRef is an object as the command line names it: <name>, or
// <namespace>/<name>.
type objectRef struct {
	namespace string // "" unless given as <namespace>/<name>
	name      string
	text      string // as typed
}

// checkNamespaceFlags refuses flags that would name nothing: -n when the
// reference names the object's namespace and --lease-namespace the
// Leases'.
func (r objectRef) checkNamespaceFlags(g *globals) error {
	if r.namespace != "" && g.set["namespace"] && g.namespace() != r.namespace && g.set["lease-namespace"] {
		return usagef("-n %s names neither the object (%s names its namespace) nor the Leases (--lease-namespace does): drop it", g.namespace(), r.text)
	}
	return nil
}

// namespaceFor is the namespace of the object, of resource gr: the one in
// the reference, else def (-n, else the context's); none for a
// cluster-scoped kind.
func (r objectRef) namespaceFor(gr string, namespaced bool, def string) (string, error) {
	switch {
	case !namespaced && r.namespace != "":
		return "", usagef("%s are cluster-scoped: give <name> without a namespace", gr)
	case !namespaced:
		return "", nil
	case r.namespace != "":
		return r.namespace, nil
	}
	return def, nil
}

// leaseNamespaceWarning is the deprecation warning for the earlier form
// `owner widgets team-a/w1 -n operators`, where -n named the Leases'
// namespace: it still does when the reference names the object's
// namespace, but --lease-namespace says so.
func (r objectRef) leaseNamespaceWarning(g *globals) string {
	if r.namespace == "" || !g.set["namespace"] || g.namespace() == r.namespace || g.set["lease-namespace"] {
		return ""
	}
	return fmt.Sprintf("-n %s is read as the Leases' namespace, as %s names the object's; write --lease-namespace %s (-n names the objects' namespace)", g.namespace(), r.text, g.namespace())
}

// parseObjectRef splits "namespace/name" or "name".
func parseObjectRef(ref string) (objectRef, error) {
	namespace, name, namespaced := strings.Cut(ref, "/")
	if !namespaced {
		namespace, name = "", ref
	}
	bad := name == "" || strings.Contains(name, "/") || (namespaced && namespace == "")
	if !bad && namespaced {
		bad = len(validation.IsDNS1123Label(namespace)) > 0
	}
	if bad {
		return objectRef{}, usagef("%q is not <name> or <namespace>/<name>", ref)
	}
	return objectRef{namespace: namespace, name: name, text: ref}, nil
}

// resolveResource finds resource as kubectl would (plural, singular, kind,
// short name, optionally with .group), and whether it is namespaced.
func (c *cluster) resolveResource(resource string) (schema.GroupVersionResource, bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(c.config)
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("creating a discovery client: %v", err)
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, func(string) {})
	var gvr schema.GroupVersionResource
	full, gr := schema.ParseResourceArg(strings.ToLower(resource))
	if full != nil {
		gvr, err = mapper.ResourceFor(*full)
	}
	if full == nil || err != nil {
		gvr, err = mapper.ResourceFor(gr.WithVersion(""))
	}
	if err != nil {
		if meta.IsNoMatchError(err) {
			return gvr, false, fmt.Errorf("the API server has no resource %q: use a name from 'kubectl api-resources' (e.g. widgets)", resource)
		}
		return gvr, false, c.apiError(fmt.Sprintf("looking up resource %q", resource), err)
	}
	gvk, err := mapper.KindFor(gvr)
	if err != nil {
		return gvr, false, c.apiError(fmt.Sprintf("looking up resource %q", resource), err)
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return gvr, false, c.apiError(fmt.Sprintf("looking up resource %q", resource), err)
	}
	return gvr, mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// objectLabels reads whether the object exists, and its labels, from its
// metadata only, the least a user may be allowed to read.
func (c *cluster) objectLabels(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (bool, map[string]string, error) {
	mc, err := metadata.NewForConfig(c.config)
	if err != nil {
		return false, nil, err
	}
	obj, err := mc.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return true, obj.Labels, nil
	case apierrors.IsNotFound(err):
		return false, nil, nil
	default:
		return false, nil, fmt.Errorf("could not check: %s", oneLine(err.Error()))
	}
}

func writeOwnerTable(w io.Writer, o ownerJSON, r ringstatus.Ring, wide bool) error {
	exists := "exists"
	switch {
	case o.Exists == nil:
		exists = "existence unknown: " + o.ExistsError
	case !*o.Exists:
		exists = "not found: this is where it would be reconciled"
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "OBJECT\t%s %s (%s)\n", o.Resource, o.Key, exists)
	fmt.Fprintf(tw, "RING\t%s in namespace %s (%d partitions, %d members: %s)\n", r.Name, r.Namespace, r.Partitions, len(o.RingMembers), orDash(strings.Join(o.RingMembers, ", ")))
	if wide {
		fmt.Fprintf(tw, "PARAMS\t%s\n", orDash(r.Params))
	}
	fmt.Fprintf(tw, "KEY\t%s\n", o.Key)
	fmt.Fprintf(tw, "PARTITION\t%d\n", o.Partition)
	fmt.Fprintf(tw, "OWNER\t%s\n", orDash(o.Owner.Owner))
	if wide {
		fmt.Fprintf(tw, "LEASE\t%s\n", orDash(leaseOf(r, o.Owner.Owner)))
	}
	fmt.Fprintf(tw, "CLAIMED BY\t%s\n", orDash(strings.Join(o.ClaimedBy, ", ")))
	if o.Exists != nil && *o.Exists {
		if len(o.PartitionLabels) == 0 {
			fmt.Fprintf(tw, "LABEL\tnone of ring %s (replicas with --cache-mode labels write one)\n", r.Name)
		}
		for _, l := range o.PartitionLabels {
			fmt.Fprintf(tw, "LABEL\t%s=%s (%s)\n", l.Key, l.Value, l.describe(o.Partition))
		}
	}
	if o.Note != "" {
		fmt.Fprintf(tw, "NOTE\t%s\n", o.Note)
	}
	return tw.Flush()
}

// leaseOf is the name of identity's Lease in r, "" when it has none.
func leaseOf(r ringstatus.Ring, identity string) string {
	for _, m := range r.Members {
		if identity != "" && m.Identity == identity {
			return m.Lease
		}
	}
	return ""
}

// describe says what the label means for an object whose key is in
// partition keyPartition.
func (l partitionLabel) describe(keyPartition int) string {
	switch {
	case !l.Current:
		return "a key of other ring parameters: the ring no longer reads it; kshard unlabel --key removes it"
	case l.Partition == nil:
		return "names no partition: the owner of its partition labels it again"
	case *l.Partition == keyPartition:
		return fmt.Sprintf("partition %d, its key's", *l.Partition)
	default:
		return fmt.Sprintf("partition %d, not its key's %d: an owned object carries its controller owner's partition; any other is relabelled", *l.Partition, keyPartition)
	}
}
