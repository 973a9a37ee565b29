// Package controller is a fixture: the docs in ../../planted.md name what
// it has and what it does not.
package controller

import "context"

// Gate admits a key's events while its partition is active.
type Gate struct{ Options Options }

// Revoke stops admitting set's keys; fence cancels their reconciles.
func (g *Gate) Revoke(ctx context.Context, set []int, fence bool) error { return nil }

// Options configures a Gate.
type Options struct{ Workers int }

// New returns a Gate.
func New(o Options) *Gate { return &Gate{Options: o} }
