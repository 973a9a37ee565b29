// Command example-operator is kshard's reference shard-aware operator: it
// reconciles Widgets (demo.kshard.io/v1alpha1) into owned ConfigMaps, sharded
// across the replicas of a StatefulSet. `example-operator --help` lists every
// flag and its default.
package main

import (
	"os"

	"github.com/kshard/kshard/cmd/example-operator/app"
)

func main() { os.Exit(app.Main(os.Args[1:], os.Stderr)) }
