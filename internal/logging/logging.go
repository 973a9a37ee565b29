// Package logging holds kshard's one default logger, used by every package
// whose options leave Logger unset (manager, lease, controller), so that a program that
// sets none gets one format from all of them.
package logging

import (
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// Default writes JSON lines to stderr, the format log collectors in a
// cluster expect, with timestamps, at verbosity 0.
func Default() logr.Logger {
	return funcr.NewJSON(func(obj string) { fmt.Fprintln(os.Stderr, obj) }, funcr.Options{LogTimestamp: true, Verbosity: 0})
}
