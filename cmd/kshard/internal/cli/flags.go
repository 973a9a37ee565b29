package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// usageError is bad input on the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errHelp asks for the command's help on stdout and exit code 0.
var errHelp = errors.New("help requested")

// globals are the flags of status and owner, accepted before or after the
// command.
type globals struct {
	kubeconfig string
	context    string
	namespace  string
	ring       string
	output     string
	set        map[string]bool // long names of the flags given
}

// register binds g's flags to fs with g's current values as defaults, so
// that flags given before the command survive the command's own parse.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.kubeconfig, "kubeconfig", g.kubeconfig, "")
	fs.StringVar(&g.context, "context", g.context, "")
	fs.StringVar(&g.namespace, "namespace", g.namespace, "")
	fs.StringVar(&g.namespace, "n", g.namespace, "")
	fs.StringVar(&g.ring, "ring", g.ring, "")
	fs.StringVar(&g.output, "output", g.output, "")
	fs.StringVar(&g.output, "o", g.output, "")
}

// noteSet records which of fs's flags were given, under their long names.
func (g *globals) noteSet(fs *flag.FlagSet) {
	if g.set == nil {
		g.set = map[string]bool{}
	}
	long := map[string]string{"n": "namespace", "o": "output"}
	fs.Visit(func(f *flag.Flag) {
		name := f.Name
		if l, ok := long[name]; ok {
			name = l
		}
		g.set[name] = true
	})
}

func (g *globals) validate() error {
	switch g.output {
	case "table", "json":
	default:
		return usagef("-o %q is not a known output format: use -o table or -o json", g.output)
	}
	if g.set["namespace"] && g.namespace == "" {
		return usagef("-n/--namespace is empty: give the namespace of the ring's Leases, or leave it out for the context's namespace")
	}
	return nil
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// Help and errors are printed by Main, in one line and with our wording.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseInterspersed parses flags anywhere in args and returns the
// positional arguments in order. Everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, flagError(err)
		}
		rest := fs.Args()
		// flag stops at the first non-flag, or after consuming "--".
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// flagError turns the flag package's errors into usage errors worded for a
// user (flag names with two dashes, "unknown flag").
func flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return errHelp
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return usagef("unknown flag %s", dashes(name))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return usagef("flag %s needs a value", dashes(name))
	}
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		// invalid value "x" for flag -name: reason
		if i := strings.Index(rest, " for flag -"); i >= 0 {
			value := rest[:i]
			name, reason, _ := strings.Cut(rest[i+len(" for flag -"):], ": ")
			return usagef("invalid value %s for %s: %s", value, dashes(name), reason)
		}
	}
	return usagef("%s", msg)
}

// dashes spells a flag as the user most likely typed it.
func dashes(name string) string {
	name = strings.TrimLeft(name, "-")
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
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

func (v intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("want a whole number")
	}
	*v.n = n
	return nil
}
