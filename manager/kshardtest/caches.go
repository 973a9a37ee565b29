package kshardtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/kshard/kshard/internal/process"
)

// CacheReportServer names the server a replica process binds with
// ServeCacheReport in its "serving" log line; Env.CacheReport finds it so.
const CacheReportServer = "kshardtest cache"

// MetricsServer names a kshard manager's metrics server in its "serving"
// log line, for Env.ServingAddr.
const MetricsServer = process.ServerMetrics

// cacheReportPath is where ServeCacheReport answers.
const cacheReportPath = "/cache"

// CachedObject is an object a replica's cache holds: its key
// ("namespace/name") and the resourceVersion cached.
type CachedObject struct {
	Key             string `json:"key"`
	ResourceVersion string `json:"resourceVersion"`
}

// ServeCacheReport is for a replica binary built for tests: it binds addr
// (port 0: one the kernel picks), logs the bound address in a "serving"
// line on stderr, as a kshard manager logs its servers, and answers GET
// /cache with the objects list returns (for a sharded cache, those of the
// partitions it holds) until ctx ends; then it shuts the server down and
// returns. CheckCaches compares the replicas' answers with the API server.
func ServeCacheReport(ctx context.Context, addr string, list func(context.Context) ([]CachedObject, error)) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("kshardtest: the %s server cannot listen on %q: %w", CacheReportServer, addr, err)
	}
	line, err := json.Marshal(map[string]string{"msg": "serving", "server": CacheReportServer, "address": l.Addr().String()})
	if err != nil {
		_ = l.Close()
		return err
	}
	fmt.Fprintln(os.Stderr, string(line))
	return serveCacheReport(ctx, l, list)
}

// serveCacheReport serves list's report on l until ctx ends.
func serveCacheReport(ctx context.Context, l net.Listener, list func(context.Context) ([]CachedObject, error)) error {
	mux := http.NewServeMux()
	mux.HandleFunc(cacheReportPath, func(w http.ResponseWriter, req *http.Request) {
		objs, err := list(req.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(objs)
	})
	s := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	select {
	case err := <-served:
		return fmt.Errorf("kshardtest: the %s server: %w", CacheReportServer, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.Shutdown(sctx)
	<-served
	return err
}

// ReadCacheReport asks the ServeCacheReport server at addr what its cache
// holds.
func ReadCacheReport(ctx context.Context, addr string) ([]CachedObject, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+cacheReportPath, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kshardtest: reading the cache report at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("kshardtest: the cache report at %s answered %s: %s", addr, resp.Status, strings.TrimSpace(string(body)))
	}
	var objs []CachedObject
	if err := json.NewDecoder(resp.Body).Decode(&objs); err != nil {
		return nil, fmt.Errorf("kshardtest: decoding the cache report at %s: %w", addr, err)
	}
	return objs, nil
}

// CacheReport waits until identity's process has bound its
// ServeCacheReport server (ctx bounds the wait) and returns what its cache
// holds. Only process replicas (StartProcess) can be asked.
func (e *Env) CacheReport(ctx context.Context, identity string) ([]CachedObject, error) {
	addr, err := e.ServingAddr(ctx, identity, CacheReportServer)
	if err != nil {
		return nil, err
	}
	return ReadCacheReport(ctx, addr)
}

// ServingAddr waits until identity's process has logged the "serving" line
// of server (MetricsServer, CacheReportServer or a server of the operator's own that logs one so; ctx bounds the wait)
// and returns the address to dial. Only process replicas (StartProcess)
// log to a file the kit reads.
func (e *Env) ServingAddr(ctx context.Context, identity, server string) (string, error) {
	e.mu.Lock()
	m := e.replicas[identity]
	e.mu.Unlock()
	if m == nil || !m.alive() {
		return "", fmt.Errorf("kshardtest: %s is not running", identity)
	}
	if m.proc == nil {
		return "", fmt.Errorf("kshardtest: %s runs in this process; only a process replica's servers can be found from its log", identity)
	}
	return m.proc.ServingAddr(ctx, server)
}

// CheckCaches compares what the live replicas' caches hold (caches, by
// identity) with the objects the API server holds (objects, every object
// of the kinds and namespaces the replicas watch). With sharded caches
// every object must be in exactly one replica's cache, otherwise in every
// replica's, in each at the API server's resourceVersion; and no cache may
// hold an object the API server does not. It returns one line per problem,
// none when the caches agree.
func CheckCaches(objects []CachedObject, caches map[string][]CachedObject, sharded bool) []string {
	want := make(map[string]string, len(objects))
	for _, o := range objects {
		want[o.Key] = o.ResourceVersion
	}
	holders := map[string][]string{}
	var problems []string
	ids := make([]string, 0, len(caches))
	for id := range caches {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		seen := map[string]bool{}
		for _, o := range caches[id] {
			if seen[o.Key] {
				problems = append(problems, fmt.Sprintf("%s: %s's cache lists it twice", o.Key, id))
				continue
			}
			seen[o.Key] = true
			rv, exists := want[o.Key]
			switch {
			case !exists:
				problems = append(problems, fmt.Sprintf("%s: in %s's cache (resourceVersion %s) but not on the API server", o.Key, id, o.ResourceVersion))
			case rv != o.ResourceVersion:
				problems = append(problems, fmt.Sprintf("%s: %s's cache holds resourceVersion %s, the API server %s", o.Key, id, o.ResourceVersion, rv))
			}
			holders[o.Key] = append(holders[o.Key], id)
		}
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h := holders[k]
		switch {
		case sharded && len(h) != 1:
			problems = append(problems, fmt.Sprintf("%s: in %d live replicas' caches %v, want exactly one", k, len(h), h))
		case !sharded && len(h) != len(caches):
			problems = append(problems, fmt.Sprintf("%s: in the caches of %v only, want every live replica's (%d)", k, h, len(caches)))
		}
	}
	return problems
}
