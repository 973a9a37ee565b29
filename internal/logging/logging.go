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
func Default() logr.Logger { return New(0) }

// New is Default at verbosity v: lines logged with V(n), n <= v, are kept.
func New(v int) logr.Logger {
	return funcr.NewJSON(func(obj string) { fmt.Fprintln(os.Stderr, obj) }, funcr.Options{LogTimestamp: true, TimestampFormat: TimestampFormat, Verbosity: v})
}

// TimestampFormat is ISO 8601 (RFC 3339) to the microsecond, with the
// offset, which log collectors parse without configuration; funcr's own
// default has neither the "T" nor a zone.
const TimestampFormat = "2006-01-02T15:04:05.000000Z07:00"
