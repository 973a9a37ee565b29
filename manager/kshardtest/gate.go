package kshardtest

import (
	"errors"
	"net/http"
	"sync"
)

// gateState is what a gate does with a request.
type gateState int

const (
	gateOpen gateState = iota // pass it on
	gateHold                  // hold it until the state changes
	gateCut                   // fail it at once
)

// errCut is what a crashed in-process replica's requests fail with.
var errCut = errors.New("kshardtest: this replica crashed; its connection to the API server is cut")

// gate sits between an in-process replica and the API server, so the kit
// can cut it off (Crash) or freeze its traffic (Pause).
type gate struct {
	mu      sync.Mutex
	state   gateState
	changed chan struct{} // closed and replaced on every state change
}

func newGate() *gate { return &gate{changed: make(chan struct{})} }

func (g *gate) set(s gateState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.state = s
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *gate) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		for {
			g.mu.Lock()
			state, changed := g.state, g.changed
			g.mu.Unlock()
			switch state {
			case gateOpen:
				return next.RoundTrip(req)
			case gateCut:
				closeBody(req)
				return nil, errCut
			}
			select {
			case <-changed:
			case <-req.Context().Done():
				closeBody(req)
				return nil, req.Context().Err()
			}
		}
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// closeBody closes the body of a request that is not sent, as a
// RoundTripper must.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
