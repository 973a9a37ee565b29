package cli

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// errInterrupted: the user pressed Ctrl-C and everything started was
// stopped. Exit code 130, as shells report for SIGINT.
var errInterrupted = errors.New("interrupted; stopped everything it started")

// env is what a command may touch besides its arguments.
type env struct {
	prog   string // "kshard" or "kubectl shard", for messages and help
	stdout io.Writer
	stderr io.Writer
	// connect, when set, replaces connect for the commands that write
	// (tests run them against a fake clientset).
	connect func(*globals) (*cluster, error)
}

type command struct {
	name     string
	synopsis string
	// globals says whether the command takes the global flags.
	globals bool
	help    func(prog string) string
	run     func(e *env, g *globals, args []string) error
}

func commands() []*command {
	return []*command{statusCommand(), ownerCommand(), releaseCommand(), unlabelCommand(), demoCommand(), versionCommand()}
}

// commandNames lists the commands for messages: "status, owner, ...".
func commandNames() string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// Main runs the command line args (args[0] is the program name) and returns
// the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	return (&env{stdout: stdout, stderr: stderr}).main(args)
}

// main is Main with e's writers (and, in tests, its connect).
func (e *env) main(args []string) int {
	// client-go logs some failures through klog on top of returning them
	// (discovery does); the error we print is the one line the user needs.
	klog.SetLogger(logr.Discard())
	stdout := e.stdout
	e.prog = "kshard"
	if len(args) > 0 {
		e.prog = progName(args[0])
	}
	var rest []string
	if len(args) > 1 {
		rest = args[1:]
	}

	g := &globals{}
	top := newFlagSet(e.prog)
	// Flags up to the command are the globals (and --version); the
	// command parses its own, anywhere after it.
	top.SetInterspersed(false)
	g.register(top)
	var version bool
	top.BoolVar(&version, "version", false, "")
	if err := top.Parse(rest); err != nil {
		return e.exit(nil, flagError(err))
	}
	g.noteSet(top)
	// Registering the globals again for the command resets them, so the
	// command parses the ones given before it once more.
	before := rest[:len(rest)-len(top.Args())]
	rest = top.Args()
	if version {
		rest = []string{"version"}
	}
	if len(rest) == 0 {
		return e.exit(nil, usagef("missing command: one of %s", commandNames()))
	}
	name := rest[0]
	if name == "help" {
		if len(rest) == 1 {
			fmt.Fprint(stdout, e.usage())
			return 0
		}
		name, rest = rest[1], []string{rest[1], "--help"}
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		if !c.globals {
			for _, f := range slices.Sorted(maps.Keys(g.set)) {
				if f != "version" {
					return e.exit(c, usagef("flag --%s does not apply to %s", f, c.name))
				}
			}
			return e.exit(c, c.run(e, g, rest[1:]))
		}
		return e.exit(c, c.run(e, g, append(slices.Clone(before), rest[1:]...)))
	}
	return e.exit(nil, usagef("unknown command %q: one of %s", name, commandNames()))
}

// exit reports err in one line on stderr and returns the exit code.
func (e *env) exit(c *command, err error) int {
	where, helpCmd := e.prog, e.prog+" --help"
	if c != nil {
		where, helpCmd = e.prog+" "+c.name, e.prog+" "+c.name+" --help"
	}
	var usage *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errHelp):
		if c == nil {
			fmt.Fprint(e.stdout, e.usage())
		} else {
			fmt.Fprint(e.stdout, c.help(e.prog))
		}
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(e.stderr, "%s: %s (see '%s')\n", where, oneLine(usage.msg), helpCmd)
		return 2
	case errors.Is(err, errInterrupted):
		fmt.Fprintf(e.stderr, "%s: %v\n", where, err)
		return 130
	default:
		fmt.Fprintf(e.stderr, "%s: %s\n", where, oneLine(err.Error()))
		return 1
	}
}

// oneLine folds a multi-line message (client-go and the control plane
// produce some) so that every failure is one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// progName is how the user invoked us: as the kubectl plugin kubectl-shard,
// kubectl shows it as "kubectl shard".
func progName(arg0 string) string {
	base := filepath.Base(arg0)
	if strings.HasPrefix(base, "kubectl-shard") {
		return "kubectl shard"
	}
	return "kshard"
}

func (e *env) usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, `%[1]s inspects kshard rings — replicas of a controller that share its keys through
coordination.k8s.io Leases — and shows which replica reconciles an object.

Usage:
  %[1]s <command> [flags]

Commands:
`, e.prog)
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-9s %s\n", c.name, c.synopsis)
	}
	fmt.Fprintf(&b, `
Flags of status, owner, release and unlabel (before or after the command):
%s
Run '%s <command> --help' for a command's flags and details.
`, globalFlagsHelp, e.prog)
	return b.String()
}

const globalFlagsHelp = `  -n, --namespace NS        namespace of the objects (default: the context's namespace);
                            also of the ring's Leases unless --lease-namespace is given
  -A, --all-namespaces      every namespace: status shows the rings of every namespace,
                            unlabel scans the objects of every namespace; owner and
                            release act in one namespace and refuse it
      --lease-namespace NS  namespace of the ring's Leases (default: -n, else the
                            context's namespace)
      --ring NAME           ring name, the Leases' kshard.io/ring label (default: status
                            shows every ring; owner uses the only one; release and
                            unlabel need it)
  -o, --output FORMAT       wide (more columns), json or yaml (default: a table)
      --kubeconfig PATH     kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)
      --context NAME        kubeconfig context to use (default: the current context)
  and kubectl's other connection flags, which override the kubeconfig as in kubectl:
      --cluster, --user, --server, --tls-server-name, --insecure-skip-tls-verify,
      --certificate-authority, --client-certificate, --client-key, --token,
      --username, --password, --as, --as-group, --as-uid, --request-timeout
`
