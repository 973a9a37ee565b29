package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/internal/partitionlabel"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
)

func unlabelCommand() *command {
	return &command{
		name:     "unlabel",
		synopsis: "remove a ring's partition labels from objects (uninstalling --cache-mode labels)",
		globals:  true,
		help: func(prog string) string {
			return fmt.Sprintf(`Remove a ring's partition labels from every object of the resources given.

Usage:
  %[1]s unlabel --ring NAME <resource>... [-n NS | -A] [--lease-namespace NS] [flags]

Replicas running --cache-mode labels write each object's partition into a
label of the ring's domain, <ring>.kshard.io/<hash>-<scheme>-p<partitions>,
once in the object's life. Nothing removes those labels when the operator is
uninstalled, or moves to --cache-mode full, or changes its partition count
(which makes a new key and leaves the old one behind): this command does.

It lists the objects' metadata page by page and sends each object that
carries one of the ring's labels (every key <ring>.kshard.io/..., or only
--key) one JSON merge patch of metadata.labels that removes them, and
nothing else. Objects without them are not written. Progress goes to
stderr; the result per resource and namespace to stdout.

The objects are those of namespace -n (default: the context's namespace),
or of every namespace with -A.

Run it when no replica of the ring labels any more: one in --cache-mode
labels labels again what this removes. It reads the ring's Leases first, in
--lease-namespace (default: -n, else the context's namespace; when that
holds none of the ring's Leases, every namespace's), and refuses while a
live replica publishes cache mode labels (--force skips the check), unless
--key names a key the ring no longer uses (that of an earlier partition
count): that one may go while the ring runs.

It exits 1 unless every object was scanned and unlabelled (a forbidden list
or patch stops that resource at once, naming the permission: it needs list
and patch on each resource, in the namespace given or cluster-wide with -A),
and 130 when interrupted (the objects done so far are reported). -o wide
prints the same table.

Examples:
  %[1]s unlabel --ring example-operator widgets configmaps -A --lease-namespace kshard-system --dry-run
  %[1]s unlabel --ring example-operator widgets configmaps -n team-a --lease-namespace kshard-system
  %[1]s unlabel --ring example-operator configmaps -A --key example-operator.kshard.io/xx1-key-p127

Flags:
      --ring NAME               the ring whose labels to remove (required)
      --object-namespace NS     deprecated: the objects' namespaces (repeat it or separate
                                with commas); use -n, once per namespace, or -A
      --key KEY                 remove only this label key (one of the ring's, e.g. after a
                                change of --partitions), not every key of the ring's domain
      --dry-run[=MODE]          client (no request but the lists; the default when given
                                without a value) or server (patches sent with dryRun=All, so
                                the API server checks permission and validity): changes nothing
      --qps N                   requests per second at most, lists and patches together
                                (default %[3]d)
      --force                   do not refuse while live replicas of the ring run
                                --cache-mode labels
%[2]s`, prog, globalFlagsHelp, defaultUnlabelQPS)
		},
		run: runUnlabel,
	}
}

// Defaults and bounds of unlabel.
const (
	defaultUnlabelQPS = 50
	maxUnlabelQPS     = 1000
	// unlabelPageSize is the page of each metadata LIST.
	unlabelPageSize = 500
	// unlabelFailureLimit stops a resource after this many consecutive
	// failed patches: the API server is unreachable or refuses them all.
	unlabelFailureLimit = 5
	// progressEvery bounds how often progress is printed.
	progressEvery = 2 * time.Second
)

// Values of --dry-run.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
	dryRunServer = "server"
)

type unlabelOptions struct {
	ring       string
	resources  []string
	namespaces []string // nil with -A; the deprecated --object-namespace's until run resolves them
	all        bool
	key        string // "" for every key of the ring's domain
	dryRun     string
	qps        int
	force      bool
}

// unlabelResult is what unlabel did to one resource in one namespace; the
// items of `unlabel -o json`.
type unlabelResult struct {
	Resource string `json:"resource"`
	// Namespace is "" for every namespace (-A).
	Namespace string `json:"namespace"`
	// Scanned counts the objects listed; Labelled those carrying a label
	// to remove, and Keys how many carried each key.
	Scanned  int            `json:"scanned"`
	Labelled int            `json:"labelled"`
	Keys     map[string]int `json:"keys"`
	// Unlabelled counts the objects patched (under --dry-run=server,
	// accepted by the dry run; under --dry-run=client, none); Gone those
	// deleted before their patch; Failed those whose patch failed.
	Unlabelled int `json:"unlabelled"`
	Gone       int `json:"gone"`
	Failed     int `json:"failed"`
	// Error says why the resource was not done, if it was not.
	Error string `json:"error,omitempty"`
}

func (r unlabelResult) ok() bool { return r.Error == "" && r.Failed == 0 }

// unlabelJSON is the document `unlabel -o json` (and -o yaml) prints.
type unlabelJSON struct {
	Ring    string          `json:"ring"`
	Key     string          `json:"key,omitempty"`
	DryRun  string          `json:"dryRun"`
	Results []unlabelResult `json:"results"`
}

func runUnlabel(e *env, g *globals, args []string) error {
	fs := newFlagSet("unlabel")
	g.register(fs)
	o := unlabelOptions{qps: defaultUnlabelQPS, dryRun: dryRunNone}
	fs.StringSliceVar(&o.namespaces, "object-namespace", nil, "")
	fs.StringVar(&o.key, "key", "", "")
	fs.StringVar(&o.dryRun, "dry-run", dryRunNone, "")
	fs.Lookup("dry-run").NoOptDefVal = dryRunClient
	fs.Var(intValue{&o.qps}, "qps", "")
	fs.BoolVar(&o.force, "force", false, "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	g.noteSet(fs)
	o.ring, o.all = g.ring, g.allNamespaces
	if err := o.validate(e.prog, pos); err != nil {
		return err
	}
	if err := g.validate(); err != nil {
		return err
	}
	if err := o.checkNamespaceFlags(g); err != nil {
		return err
	}
	if len(o.namespaces) > 0 {
		fmt.Fprintf(e.stderr, "warning: --object-namespace is deprecated: give the objects' namespace with -n (once per namespace), or -A for every namespace\n")
	}
	c, err := e.dial(g)
	if err != nil {
		return err
	}
	if !o.all && len(o.namespaces) == 0 {
		o.namespaces = []string{c.namespace} // -n, else the context's, as kubectl
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !o.force {
		if err := c.refuseWhileLabelling(ctx, e.stderr, o.ring, o.key); err != nil {
			return err
		}
	}
	cfg := rest.CopyConfig(c.config)
	cfg.QPS, cfg.Burst = float32(o.qps), o.qps
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating a metadata client for %s: %v", cfg.Host, err)
	}
	var results []unlabelResult
	for _, resource := range o.resources {
		gvr, namespaced, err := c.resolveResource(resource)
		if err != nil {
			return err
		}
		gr := gvr.GroupResource().String()
		if !namespaced {
			return fmt.Errorf("%s are cluster-scoped: kshard labels only namespaced kinds, so they carry no partition label to remove", gr)
		}
		namespaces := o.namespaces
		if o.all {
			namespaces = []string{metav1.NamespaceAll}
		}
		for _, ns := range namespaces {
			res := unlabelResult{Resource: gr, Namespace: ns, Keys: map[string]int{}}
			u := &unlabeller{store: metadataStore{mc.Resource(gvr), ns}, opts: o, gvr: gvr, progress: e.stderr}
			u.run(ctx, &res)
			results = append(results, res)
			if ctx.Err() != nil {
				break
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	if werr := writeUnlabelResults(e.stdout, g.output, unlabelJSON{Ring: o.ring, Key: o.key, DryRun: o.dryRun, Results: results}); werr != nil {
		return werr
	}
	if ctx.Err() != nil {
		return errInterrupted
	}
	if failed := notOK(results); failed > 0 {
		return fmt.Errorf("%d of %d resource(s) not fully unlabelled (see above)", failed, len(results))
	}
	return nil
}

// validate checks the flags and arguments, and fills o.resources.
func (o *unlabelOptions) validate(prog string, pos []string) error {
	switch {
	case o.ring == "":
		return usagef("unlabel needs --ring: the ring whose partition labels to remove (they are <ring>.%s/...)", partitionlabel.Domain)
	case len(pos) == 0:
		return usagef("give the resources to unlabel, e.g. %s unlabel --ring %s widgets configmaps -n team-a (or -A for every namespace)", prog, o.ring)
	case o.all && len(o.namespaces) > 0:
		return usagef("give -A or --object-namespace, not both")
	case o.qps < 1 || o.qps > maxUnlabelQPS:
		return usagef("--qps %d: give 1 to %d requests per second", o.qps, maxUnlabelQPS)
	}
	switch o.dryRun {
	case dryRunNone, dryRunClient, dryRunServer:
	default:
		return usagef("--dry-run=%q: give client or server (or --dry-run alone for client)", o.dryRun)
	}
	if err := lease.ValidateRing(o.ring); err != nil {
		return usagef("not a valid ring name: --ring %v", err)
	}
	if o.key != "" {
		if !isRingLabel(o.ring, o.key) {
			return usagef("--key %q is not one of ring %s's partition labels: those are %s.%s/<hash>-<scheme>-p<partitions>", o.key, o.ring, o.ring, partitionlabel.Domain)
		}
		if errs := validation.IsQualifiedName(o.key); len(errs) > 0 {
			return usagef("--key %q is not a label key: %s", o.key, strings.Join(errs, "; "))
		}
	}
	for i, ns := range o.namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 || ns == "" {
			return usagef("--object-namespace %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		if slices.Contains(o.namespaces[:i], ns) {
			return usagef("--object-namespace %s is given twice", ns)
		}
	}
	for _, arg := range pos {
		if arg == dryRunClient || arg == dryRunServer {
			return usagef("%q is not a resource: write --dry-run=%s, with '='", arg, arg)
		}
		for _, r := range strings.Split(arg, ",") {
			if r == "" {
				return usagef("resource list %q has an empty name", arg)
			}
			if !slices.Contains(o.resources, r) {
				o.resources = append(o.resources, r)
			}
		}
	}
	return nil
}

// checkNamespaceFlags refuses -n where it would name nothing: -A or the
// deprecated --object-namespace name the objects, and --lease-namespace the
// Leases. (With -A or --object-namespace alone, -n names the Leases'
// namespace, as it did before it named the objects'.)
func (o *unlabelOptions) checkNamespaceFlags(g *globals) error {
	if !g.set["namespace"] || !g.set["lease-namespace"] {
		return nil
	}
	switch {
	case o.all:
		return usagef("-n %s names neither the objects (-A takes every namespace) nor the Leases (--lease-namespace does): drop it", g.namespace())
	case len(o.namespaces) > 0:
		return usagef("-n %s names neither the objects (--object-namespace does) nor the Leases (--lease-namespace does): drop it, or give the objects' namespace with -n instead of --object-namespace", g.namespace())
	}
	return nil
}

// refuseWhileLabelling reads the ring's Leases and fails while a live
// replica publishes cache mode labels: it would label again what unlabel
// removes, unless key is set and is not the ring's current label key (whose
// parameters the Leases carry). The Leases are read in the Leases'
// namespace; when it holds none of the ring's and --lease-namespace was not
// given (it defaulted to the objects' namespace), in every namespace: a
// ring's labels are named after the ring only, so its replicas label
// wherever they run. A ring that cannot be read is only warned about.
func (c *cluster) refuseWhileLabelling(ctx context.Context, stderr io.Writer, ring, key string) error {
	where := fmt.Sprintf("namespace %q", c.leaseNamespace)
	list, err := c.client.CoordinationV1().Leases(c.leaseNamespace).List(ctx, metav1.ListOptions{LabelSelector: lease.LabelRing + "=" + ring})
	if err == nil && len(list.Items) == 0 && !c.leaseNamespaceGiven {
		where = "every namespace"
		list, err = c.client.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: lease.LabelRing + "=" + ring})
	}
	if err != nil {
		hint := ", or give the Leases' namespace with --lease-namespace"
		if c.leaseNamespaceGiven {
			hint = ""
		}
		fmt.Fprintf(stderr, "warning: could not read the Leases of ring %q in %s to check that no replica labels any more (%s); make sure none runs --cache-mode labels%s\n",
			ring, where, oneLine(err.Error()), hint)
		return nil
	}
	var labelling, unknown []string
	for _, r := range analyzeByNamespace(list.Items, time.Now()) {
		if cfg, err := membership.ParseParams(r.Params); err == nil && key != "" {
			if current, err := shard.PartitionLabelKey(ring, cfg); err == nil && current != key {
				continue // this ring writes another key: this one may go while it runs
			}
		}
		for _, m := range r.Members {
			id := fmt.Sprintf("%s in namespace %s", m.Identity, r.Namespace)
			switch {
			case !m.Live():
			case m.CacheMode == "labels":
				labelling = append(labelling, id)
			case m.CacheMode == "":
				unknown = append(unknown, id)
			}
		}
	}
	if len(labelling) > 0 {
		return fmt.Errorf("ring %q has live replicas in cache mode labels (%s): they label again what this removes; stop them (scale the operator to 0) or roll them to --cache-mode full first, or pass --force",
			ring, strings.Join(labelling, ", "))
	}
	if len(unknown) > 0 {
		fmt.Fprintf(stderr, "warning: live replicas of ring %q (%s) do not say their cache mode (an older kshard); if they run --cache-mode labels they label again what this removes\n",
			ring, strings.Join(unknown, ", "))
	}
	return nil
}

// labelStore is what unlabel needs of one resource in one namespace (or
// all): metadata lists and label patches.
type labelStore interface {
	list(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error)
	patch(ctx context.Context, namespace, name string, patch []byte, dryRun bool) error
}

// metadataStore is labelStore on client-go's metadata client: it lists
// namespace ("" for every one) and patches each object in its own.
type metadataStore struct {
	r         metadata.Getter
	namespace string
}

func (s metadataStore) list(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	return s.r.Namespace(s.namespace).List(ctx, opts)
}

func (s metadataStore) patch(ctx context.Context, namespace, name string, patch []byte, dryRun bool) error {
	opts := metav1.PatchOptions{FieldManager: "kshard-unlabel"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err := s.r.Namespace(namespace).Patch(ctx, name, types.MergePatchType, patch, opts)
	return err
}

// unlabeller removes the ring's labels from the objects of one store.
type unlabeller struct {
	store    labelStore
	opts     unlabelOptions
	gvr      schema.GroupVersionResource
	progress io.Writer
	now      func() time.Time // defaults to time.Now
}

// run scans the store page by page and unlabels what carries the ring's
// labels, filling res; it stops at the first forbidden request, after
// unlabelFailureLimit patches in a row failed, or when ctx ends.
func (u *unlabeller) run(ctx context.Context, res *unlabelResult) {
	if u.now == nil {
		u.now = time.Now
	}
	where := "in every namespace"
	if res.Namespace != "" {
		where = "in namespace " + res.Namespace
	}
	opts := metav1.ListOptions{Limit: unlabelPageSize}
	if u.opts.key != "" {
		opts.LabelSelector = u.opts.key // only objects that carry it
	}
	lastProgress, consecutive := u.now(), 0
	for {
		page, err := u.store.list(ctx, opts)
		if err != nil {
			if ctx.Err() == nil {
				res.Error = u.apiError("list", res.Namespace, err)
			}
			return
		}
		for _, obj := range page.Items {
			if ctx.Err() != nil {
				return
			}
			res.Scanned++
			keys := u.keysOf(obj.Labels)
			if len(keys) == 0 {
				continue
			}
			res.Labelled++
			for _, k := range keys {
				res.Keys[k]++
			}
			if u.opts.dryRun == dryRunClient {
				continue
			}
			err := u.store.patch(ctx, obj.Namespace, obj.Name, removalPatch(keys), u.opts.dryRun == dryRunServer)
			switch {
			case err == nil:
				res.Unlabelled++
				consecutive = 0
			case apierrors.IsNotFound(err):
				res.Gone++
				consecutive = 0
			case ctx.Err() != nil:
				return
			case apierrors.IsForbidden(err):
				res.Failed++
				res.Error = u.apiError("patch", obj.Namespace, err)
				return
			default:
				res.Failed++
				consecutive++
				if res.Error == "" {
					res.Error = fmt.Sprintf("patching %s %s: %s", u.gvr.GroupResource(), shard.KeyOf(obj.Namespace, obj.Name), oneLine(err.Error()))
				}
				if consecutive >= unlabelFailureLimit {
					res.Error = fmt.Sprintf("stopped after %d patches in a row failed; the last: %s", consecutive, oneLine(err.Error()))
					return
				}
			}
			if now := u.now(); now.Sub(lastProgress) >= progressEvery {
				lastProgress = now
				u.report(res, where)
			}
		}
		if opts.Continue = page.Continue; opts.Continue == "" {
			break
		}
	}
	u.report(res, where)
}

// report prints one line of progress.
func (u *unlabeller) report(res *unlabelResult, where string) {
	verb := "unlabelled"
	if u.opts.dryRun != dryRunNone {
		verb = "would be unlabelled"
	}
	n := res.Unlabelled
	if u.opts.dryRun == dryRunClient {
		n = res.Labelled
	}
	fmt.Fprintf(u.progress, "%s %s: %d scanned, %d %s\n", u.gvr.GroupResource(), where, res.Scanned, n, verb)
}

// keysOf returns the label keys of labels that unlabel removes, sorted.
func (u *unlabeller) keysOf(labels map[string]string) []string {
	if u.opts.key != "" {
		if _, ok := labels[u.opts.key]; ok {
			return []string{u.opts.key}
		}
		return nil
	}
	var keys []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if isRingLabel(u.opts.ring, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// removalPatch is the JSON merge patch that removes keys from
// metadata.labels and changes nothing else.
func removalPatch(keys []string) []byte {
	labels := make(map[string]any, len(keys))
	for _, k := range keys {
		labels[k] = nil
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	return b
}

// apiError says what a refused or failed request means for unlabel.
func (u *unlabeller) apiError(verb, namespace string, err error) string {
	gr := u.gvr.GroupResource().String()
	scope, check := "cluster-wide", "-A"
	if namespace != "" {
		scope, check = fmt.Sprintf("in namespace %q", namespace), "-n "+namespace
	}
	var status apierrors.APIStatus
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("forbidden: this user may not %s %s %s; unlabel needs list and patch on them (check: kubectl auth can-i %s %s %s)", verb, gr, scope, verb, gr, check)
	case errors.As(err, &status):
		return fmt.Sprintf("%s %s %s: %s", verb, gr, scope, oneLine(err.Error()))
	default:
		return fmt.Sprintf("%s %s %s: cannot reach the API server (%s)", verb, gr, scope, oneLine(err.Error()))
	}
}

func writeUnlabelResults(w io.Writer, output string, doc unlabelJSON) error {
	if output == outputJSON || output == outputYAML {
		return writeDoc(w, output, doc)
	}
	switch doc.DryRun {
	case dryRunClient:
		fmt.Fprintln(w, "dry run (client): nothing was sent; LABELLED objects would be unlabelled")
	case dryRunServer:
		fmt.Fprintln(w, "dry run (server): the API server accepted the UNLABELLED patches without storing them")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tNAMESPACE\tSCANNED\tLABELLED\tUNLABELLED\tGONE\tFAILED\tKEYS")
	for _, r := range doc.Results {
		ns := r.Namespace
		if ns == "" {
			ns = "(all)"
		}
		var keys []string
		for _, k := range slices.Sorted(maps.Keys(r.Keys)) {
			keys = append(keys, fmt.Sprintf("%s (%d)", k, r.Keys[k]))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.Resource, ns, r.Scanned, r.Labelled, r.Unlabelled, r.Gone, r.Failed, orDash(strings.Join(keys, ", ")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range doc.Results {
		if r.Error != "" {
			fmt.Fprintf(w, "error: %s: %s\n", r.Resource, r.Error)
		}
	}
	return nil
}
