package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Checker is a health or readiness check; nil means healthy.
type Checker func(req *http.Request) error

// Ping is a Checker that always passes.
func Ping(*http.Request) error { return nil }

// checks is a named set of Checkers served on one path, with lines of
// information that /readyz?verbose shows beside them (never failing).
type checks struct {
	mu     sync.RWMutex
	checks map[string]Checker
	infos  map[string]func() string
}

// addInfo adds a line of information named name to the verbose answer.
func (c *checks) addInfo(name string, info func() string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.infos == nil {
		c.infos = map[string]func() string{}
	}
	c.infos[name] = info
}

func (c *checks) add(name string, check Checker) error {
	if name == "" || check == nil {
		return errors.New("a check needs a name and a function")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.checks == nil {
		c.checks = map[string]Checker{}
	}
	if _, dup := c.checks[name]; dup {
		return fmt.Errorf("check %q is already registered", name)
	}
	c.checks[name] = check
	return nil
}

// ServeHTTP answers 200 "ok" when every check passes, else 500 naming each
// failing check, so `kubectl describe pod` shows why a replica is not ready.
// With ?verbose it lists every check ("[+]name ok") and the information
// lines ("[i]name: …"), as the API server's own /readyz?verbose does.
func (c *checks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, verbose := r.URL.Query()["verbose"]
	c.mu.RLock()
	names := make([]string, 0, len(c.checks))
	for n := range c.checks {
		names = append(names, n)
	}
	sort.Strings(names)
	var failed, lines []string
	for _, n := range names {
		if err := c.checks[n](r); err != nil {
			failed = append(failed, fmt.Sprintf("[-]%s failed: %v", n, err))
			lines = append(lines, failed[len(failed)-1])
		} else {
			lines = append(lines, fmt.Sprintf("[+]%s ok", n))
		}
	}
	if verbose {
		infos := make([]string, 0, len(c.infos))
		for n := range c.infos {
			infos = append(infos, n)
		}
		sort.Strings(infos)
		for _, n := range infos {
			lines = append(lines, fmt.Sprintf("[i]%s: %s", n, c.infos[n]()))
		}
	}
	c.mu.RUnlock()
	if len(failed) > 0 {
		w.WriteHeader(http.StatusInternalServerError)
	}
	switch {
	case verbose:
		fmt.Fprintln(w, strings.Join(lines, "\n"))
		if len(failed) == 0 {
			fmt.Fprint(w, "ok")
		}
	case len(failed) > 0:
		fmt.Fprintln(w, strings.Join(failed, "\n"))
	default:
		fmt.Fprint(w, "ok")
	}
}

// httpServer is one listener the manager owns: bound at Start (so a busy
// port fails Start with a clear error), shut down when the manager stops.
type httpServer struct {
	name     string
	listener net.Listener
	server   *http.Server
}

func listen(name, addr string, handler http.Handler) (*httpServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s server cannot listen on %q: %w (choose another address, or \"0\" to disable it)", name, addr, err)
	}
	return &httpServer{name: name, listener: l, server: &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// Addr is the bound address (useful when the port was ":0").
func (s *httpServer) Addr() string { return s.listener.Addr().String() }

func (s *httpServer) serve() error {
	if err := s.server.Serve(s.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s server: %w", s.name, err)
	}
	return nil
}

func (s *httpServer) shutdown(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = s.server.Shutdown(ctx)
}

func metricsHandler(reg prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	return mux
}

func probesHandler(healthz, readyz *checks) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/healthz", healthz)
	mux.Handle("/readyz", readyz)
	return mux
}
