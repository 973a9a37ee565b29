package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

func versionCommand() *command {
	return &command{
		name:     "version",
		synopsis: "print the version of this binary",
		help: func(prog string) string {
			return fmt.Sprintf(`Print the kshard module version, the source revision it was built from when
known, and the Go version.

Usage:
  %s version
`, prog)
		},
		run: func(e *env, _ *globals, args []string) error {
			fs := newFlagSet("version")
			pos, err := parseInterspersed(fs, args)
			if err != nil {
				return err
			}
			if len(pos) > 0 {
				return usagef("version takes no arguments, got %q", pos)
			}
			fmt.Fprintln(e.stdout, "kshard", version(), runtime.Version())
			return nil
		},
	}
}

// version is the module version (v1.2.3 when installed with go install
// module@version) or, for builds from a checkout, the VCS revision.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "-dirty"
			}
		}
	}
	if (v == "" || v == "(devel)") && rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		return "devel-" + rev + modified
	}
	if v == "" {
		return "(devel)"
	}
	return v
}
