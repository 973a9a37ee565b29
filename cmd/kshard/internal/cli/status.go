package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kshard/kshard/shard/ringstatus"
)

func statusCommand() *command {
	return &command{
		name:     "status",
		synopsis: "members, health and claims of the ring(s) in a namespace",
		globals:  true,
		help: func(prog string) string {
			return fmt.Sprintf(`Show the kshard ring(s) of a namespace, or of every namespace, read from
their Leases.

Usage:
  %[1]s status [--lease-namespace NS | -n NS | -A] [--ring NAME] [flags]

The rings shown are those whose Leases are in --lease-namespace (default:
-n, else the context's namespace), or in every namespace with -A.

Per member: identity, state (joining, active, leaving), partitions claimed,
target (partitions the ring assigns it; claimed differs from target while a
handoff is under way), with a sharded cache how many partitions of its target
the cache holds (WARM), its cache mode (CACHE: full, labels or server) and
how many objects its cache holds (OBJECTS, refreshed with its renewals every
few seconds; "-" for a replica that does not publish them), age of the last
renewal and health. -o wide adds the incarnation (a random id per process:
it changes when a replica restarts), the epoch of its record and its Lease.
Per ring: members, partition count P, the ring-parameters fingerprint, and
three numbers that should be 0:
  unclaimed    partitions no live member claims: their keys are reconciled
               by nobody until one does
  overlapping  partitions claimed by two live members: normal for the few
               moments of a handoff (the new owner claims first, activates
               only once the old owner has drained and released); a lasting
               overlap is a stuck drain
  malformed    Leases with the ring label that do not follow kshard's format

The table is one snapshot: every Lease is read by one list request.

Health here compares each Lease's renewTime + leaseDurationSeconds, as the
API server stores them, with this machine's clock. The replicas themselves
never use those timestamps: they judge liveness by when they observed a
Lease change, so a skewed clock can make this view differ from theirs.

Examples:
  %[1]s status -n operators
  %[1]s status -A
  %[1]s status --lease-namespace operators --ring example-operator -o yaml

Flags:
%[2]s`, prog, globalFlagsHelp)
		},
		run: runStatus,
	}
}

func runStatus(e *env, g *globals, args []string) error {
	fs := newFlagSet("status")
	g.register(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	g.noteSet(fs)
	if len(pos) > 0 {
		return usagef("status takes no arguments, got %q", pos)
	}
	if err := g.validate(); err != nil {
		return err
	}
	// status lists Leases: -A widens it to every namespace, which leaves
	// nothing for a namespace flag to name.
	if g.allNamespaces {
		for _, f := range []string{"lease-namespace", "namespace"} {
			if g.set[f] {
				return usagef("-A shows the rings of every namespace, --%s names one: give one or the other", f)
			}
		}
	}
	c, err := e.dial(g)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	var rings []ringstatus.Ring
	doc := statusJSON{}
	if g.allNamespaces {
		rings, err = c.readAllRings(ctx, g.ring)
	} else {
		doc.Namespace = c.leaseNamespace
		rings, err = c.readRings(ctx, g.ring)
	}
	if err != nil {
		return err
	}
	if g.structured() {
		doc.Rings = rings
		return writeDoc(e.stdout, g.output, doc)
	}
	return writeStatusTable(e.stdout, rings, g.output == outputWide)
}

// statusJSON is the document `status -o json` (and -o yaml) prints.
type statusJSON struct {
	// Namespace is the Leases' namespace; empty with -A, where each ring
	// names its own.
	Namespace string            `json:"namespace"`
	Rings     []ringstatus.Ring `json:"rings"`
}

// stateOf is m's state, marked when its Lease keeps the identity's place
// for the next process (KeepPlaceOnLeave).
func stateOf(m ringstatus.Member) string {
	if m.Returning && m.State != "" {
		return m.State + " (returning)"
	}
	return m.State
}

func writeStatusTable(w io.Writer, rings []ringstatus.Ring, wide bool) error {
	for i, r := range rings {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "RING %s  namespace %s  partitions %d  params %s\n", r.Name, r.Namespace, r.Partitions, orDash(r.Params))
		fmt.Fprintf(w, "members %d (live and active) of %d Leases  unclaimed %d  overlapping %d  malformed %d  foreign %d\n",
			len(r.RingMembers), len(r.Members), r.Unclaimed, r.Overlapping, r.Malformed, r.Foreign)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		header := "IDENTITY\tSTATE\tPARTITIONS\tTARGET\tWARM\tCACHE\tOBJECTS\tRENEWED\tHEALTH"
		if wide {
			header += "\tINCARNATION\tEPOCH\tLEASE"
		}
		fmt.Fprintln(tw, header)
		for _, m := range r.Members {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s", orDash(m.Identity), orDash(stateOf(m)), m.Partitions, m.Target, warm(m),
				orDash(m.CacheMode), cachedObjects(m), renewed(m), m.Health)
			if wide {
				fmt.Fprintf(tw, "\t%s\t%d\t%s", orDash(m.Incarnation), m.Generation, m.Lease)
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if r.Unclaimed > 0 {
			fmt.Fprintf(w, "unclaimed partitions: %s (nobody reconciles their keys until a member claims them)\n", ranges(r.UnclaimedPartitions))
		}
		if r.Overlapping > 0 {
			fmt.Fprintf(w, "overlapping claims: %s (normal during a handoff; if it persists, a drain is stuck)\n", ranges(r.OverlappingPartitions))
		}
		for _, m := range r.Members {
			if m.Foreign != "" {
				fmt.Fprintf(w, "foreign configuration: Lease %s runs params %s (%s)\n", m.Lease, m.Params, m.Foreign)
			}
			if m.Problem != "" {
				fmt.Fprintf(w, "malformed Lease %s: %s\n", m.Lease, m.Problem)
			}
		}
		for _, p := range r.Problems {
			fmt.Fprintf(w, "problem: %s\n", p)
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// warm prints how many partitions of its target the member's sharded cache
// holds, or "-" for a member that publishes no warm set (a full cache).
func warm(m ringstatus.Member) string {
	if m.Warm == nil {
		return "-"
	}
	return strconv.Itoa(*m.Warm)
}

// cachedObjects prints how many objects the member's cache holds, or "-"
// for a member that does not publish it.
func cachedObjects(m ringstatus.Member) string {
	if m.CachedObjects == nil {
		return "-"
	}
	return strconv.Itoa(*m.CachedObjects)
}

// renewed says how long ago the member's Lease was renewed, as kubectl
// would print an age.
func renewed(m ringstatus.Member) string {
	if m.RenewTime == nil {
		return "never"
	}
	age := time.Duration(m.RenewAgeSeconds * float64(time.Second))
	if age < 0 {
		return "in " + shortDuration(-age) + " (clock skew)"
	}
	return shortDuration(age) + " ago"
}

func shortDuration(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(math.Mod(d.Seconds(), 60)))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(math.Mod(d.Minutes(), 60)))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// ranges prints sorted partitions compactly ("0-5,9,12-13"), up to a dozen
// runs.
func ranges(ps []int) string {
	const maxRuns = 12
	var runs []string
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if len(runs) == maxRuns {
			runs = append(runs, fmt.Sprintf("… (%d partitions in all)", len(ps)))
			break
		}
		if i == j {
			runs = append(runs, fmt.Sprint(ps[i]))
		} else {
			runs = append(runs, fmt.Sprintf("%d-%d", ps[i], ps[j]))
		}
		i = j + 1
	}
	return strings.Join(runs, ",")
}
