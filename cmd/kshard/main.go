// Command kshard inspects kshard rings (`kshard status`, `kshard owner`),
// releases the Leases of replicas that are gone (`kshard release`) and runs a self-contained demo of sharded reconciliation and handoff
// (`kshard demo`). Installed as `kubectl-shard` on the PATH, it is also the
// kubectl plugin `kubectl shard`. `kshard --help` lists the commands.
package main

import (
	"os"

	"github.com/kshard/kshard/cmd/kshard/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args, os.Stdout, os.Stderr)) }
