package cli

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
)

// usageError is bad input on the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errHelp asks for the command's help on stdout and exit code 0.
var errHelp = errors.New("help requested")

// globals are the flags of status, owner, release and unlabel, accepted
// before or after the command: kubectl's standard connection flags
// (--kubeconfig and client-go's recommended overrides: --context,
// -n/--namespace, --server, --token, --as, ...), -A/--all-namespaces,
// --lease-namespace, --ring and -o/--output.
//
// Namespaces follow kubectl: -n names the objects' namespace (default: the
// context's), -A every namespace. The ring's Leases live in a namespace of
// their own, --lease-namespace, which defaults to the same namespace (-n,
// else the context's): that keeps `status -n operators` and the common
// layout of one namespace for an operator and its objects working without
// it.
type globals struct {
	kubeconfig     string
	overrides      clientcmd.ConfigOverrides // -n/--namespace is overrides.Context.Namespace
	allNamespaces  bool
	leaseNamespace string
	ring           string
	output         string
	set            map[string]bool // names of the flags given
}

// Values of -o/--output.
const (
	outputTable = "table" // the default
	outputWide  = "wide"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// register binds g's flags to fs. Registering resets them to their
// defaults: Main passes the flags given before the command again to the
// command's parse.
func (g *globals) register(fs *pflag.FlagSet) {
	fs.StringVar(&g.kubeconfig, clientcmd.RecommendedConfigPathFlag, "", "")
	clientcmd.BindOverrideFlags(&g.overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
	fs.BoolVarP(&g.allNamespaces, "all-namespaces", "A", false, "")
	fs.StringVar(&g.leaseNamespace, "lease-namespace", "", "")
	fs.StringVar(&g.ring, "ring", "", "")
	fs.StringVarP(&g.output, "output", "o", outputTable, "")
}

// noteSet records which of fs's flags were given.
func (g *globals) noteSet(fs *pflag.FlagSet) {
	if g.set == nil {
		g.set = map[string]bool{}
	}
	fs.Visit(func(f *pflag.Flag) { g.set[f.Name] = true })
}

// namespace is the -n/--namespace flag's value ("" when not given).
func (g *globals) namespace() string { return g.overrides.Context.Namespace }

// structured reports whether -o asks for a document (json or yaml) rather
// than a table.
func (g *globals) structured() bool { return g.output == outputJSON || g.output == outputYAML }

// validate checks the flags every command shares.
func (g *globals) validate() error {
	switch g.output {
	case outputTable, outputWide, outputJSON, outputYAML:
	default:
		return usagef("-o %q is not a known output format: use -o wide, -o json or -o yaml, or leave it out for a table", g.output)
	}
	if err := namespaceFlag("-n/--namespace", g.set["namespace"], g.namespace()); err != nil {
		return err
	}
	return namespaceFlag("--lease-namespace", g.set["lease-namespace"], g.leaseNamespace)
}

// namespaceFlag checks the value of a namespace flag that was given.
func namespaceFlag(flag string, given bool, ns string) error {
	if !given {
		return nil
	}
	if ns == "" {
		return usagef("%s is empty: give a namespace, or leave the flag out for the context's namespace", flag)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return usagef("%s %q is not a namespace name: %s", flag, ns, strings.Join(errs, "; "))
	}
	return nil
}

// refuseAllNamespaces is the error of a command that acts in one namespace
// when given -A.
func refuseAllNamespaces(command, why string) error {
	return usagef("-A/--all-namespaces does not apply to %s: %s", command, why)
}

func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	// Help and errors are printed by Main, in one line and with our wording.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseInterspersed parses flags anywhere in args, as kubectl does, and
// returns the positional arguments in order. Everything after "--" is
// positional.
func parseInterspersed(fs *pflag.FlagSet, args []string) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		return nil, flagError(err)
	}
	return fs.Args(), nil
}

var (
	// pflag's messages: unknown flag: --x, unknown shorthand flag: 'x' in -x,
	// flag needs an argument: --x (or: 'x' in -x), invalid argument "v" for
	// "-x, --xx" flag: reason.
	unknownShort = regexp.MustCompile(`^unknown shorthand flag: '(.)' in -`)
	needsShort   = regexp.MustCompile(`^flag needs an argument: '(.)' in -`)
	invalidValue = regexp.MustCompile(`^invalid argument (".*") for "(?:-., )?(--?[^"]+)" flag: (.*)$`)
)

// flagError turns pflag's errors into usage errors worded for a user
// (flags spelled as typed, "unknown flag", "needs a value").
func flagError(err error) error {
	if errors.Is(err, pflag.ErrHelp) {
		return errHelp
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: "); ok {
		return usagef("unknown flag %s", name)
	}
	if m := unknownShort.FindStringSubmatch(msg); m != nil {
		return usagef("unknown flag -%s", m[1])
	}
	if m := needsShort.FindStringSubmatch(msg); m != nil {
		return usagef("flag -%s needs a value", m[1])
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return usagef("flag %s needs a value", name)
	}
	if m := invalidValue.FindStringSubmatch(msg); m != nil {
		return usagef("invalid value %s for %s: %s", m[1], m[2], m[3])
	}
	return usagef("%s", msg)
}

// durationValue is a time.Duration flag whose parse error says what a
// duration looks like (flag.Duration only says "parse error").
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (durationValue) Type() string { return "duration" }

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 90s or 10m")
	}
	*v.d = d
	return nil
}

// intValue is an int flag whose parse error says what is wanted.
type intValue struct{ n *int }

func (v intValue) String() string {
	if v.n == nil {
		return ""
	}
	return fmt.Sprint(*v.n)
}

func (intValue) Type() string { return "int" }

func (v intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("want a whole number")
	}
	*v.n = n
	return nil
}
