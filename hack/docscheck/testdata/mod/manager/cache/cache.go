// Package cache is a fixture: a package reached by its directory.
package cache

// Probe reports whether the server filters.
func Probe() bool { return true }
