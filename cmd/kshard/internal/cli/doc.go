// Package cli is the kshard command line: argument parsing, the status and
// owner commands, and the wiring of the demo. Main returns an exit code
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
// Flags follow kubectl: they may come before or after the command and its
// arguments, long flags take one or two dashes, and "--" ends them. The
// standard library's flag package does the parsing; parseInterspersed only
// restarts it after each positional argument.
package cli
