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
// plugin. (cli-runtime's genericclioptions would give the same flags but
// pull kustomize into the root module.)
package cli
