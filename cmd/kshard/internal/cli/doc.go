// Package cli is the kshard command line: argument parsing, the status,
// owner, release and unlabel commands, and the wiring of the demo. Main returns an exit code
// instead of exiting, so tests drive it in-process.
//
// # Errors
//
// Every failure is one line on stderr that says what to do, and an exit
// code: 2 for bad usage (unknown flag, bad value, missing argument), 1 for a
// failure while running (unreachable API server, no ring in the namespace),
// 130 when the demo was interrupted. Nothing here panics on input.
//
// # Flags
//
// Flags follow kubectl, with the same parser (pflag): they may come before
// or after the command and its arguments, long flags take two dashes, and
// "--" ends them. status, owner, release and unlabel take kubectl's standard connection flags
// (--kubeconfig, --context, -n/--namespace, --server, --token, --as, ...)
// from client-go's clientcmd.RecommendedConfigOverrideFlags, applied to the
// kubeconfig as kubectl applies them, so `kubectl shard` behaves like any
// plugin, and -A/--all-namespaces, --lease-namespace, --ring and
// -o/--output (a table, wide, json or yaml).
//
// Namespaces are kubectl's: -n names the objects' namespace and -A every
// namespace. A ring's Leases are in --lease-namespace, which defaults to the
// namespace -n (else the context) names, as -n alone named it before.
//
// cli-runtime's genericclioptions.ConfigFlags would give the same
// connection flags, but adding it to the root module (which holds cmd/)
// brings 16 modules into go.mod, among them sigs.k8s.io/kustomize/api and
// kyaml, spf13/cobra and a disk cache: the library's users would carry them
// in their module graph for flags that clientcmd already provides.
package cli
