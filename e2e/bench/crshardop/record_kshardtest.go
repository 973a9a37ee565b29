//go:build kshardtest

// Test instrumentation, compiled only with -tags kshardtest (the tests
// build the operator so): it records every reconcile and ring event
// (internal/kitrecord). It is not part of the conversion; main.go does not
// know of it.

package main

import (
	"fmt"
	"os"

	"github.com/kshard/kshard/e2e/bench/crshardop/internal/kitrecord"
)

func init() {
	if err := kitrecord.Install(); err != nil {
		fmt.Fprintln(os.Stderr, "(kshardtest build):", err)
		os.Exit(2)
	}
}
