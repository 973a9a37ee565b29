package benchkit

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// DebugServer is the name in the "serving" line of the server ServeDebug
// binds; the harness waits for that line to learn its port (e2e/bench's
// debugServer, which its tests check against this one).
const DebugServer = "bench debug"

// ServeDebug binds addr ("0": no server) and serves /heap there, logging
// the bound address in a "serving" line as the metrics server does. The
// returned function shuts it down and waits for it.
func ServeDebug(addr string) (stop func(), err error) {
	if addr == "0" {
		return func() {}, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s server cannot listen on %q: %w", DebugServer, addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/heap", serveHeap)
	line, _ := json.Marshal(map[string]string{"msg": "serving", "server": DebugServer, "address": l.Addr().String()})
	fmt.Fprintln(os.Stderr, string(line))
	s := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Serve(l) })
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		wg.Wait()
	}, nil
}

// serveHeap collects garbage, returns the freed pages to the kernel and
// answers the live heap: what the process keeps, as opposed to its peak
// RSS, which moves with the collector's timing (GOGC lets the heap grow to
// twice the live heap before a collection).
func serveHeap(w http.ResponseWriter, _ *http.Request) {
	debug.FreeOSMemory() // a forced collection, then the scavenger
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]uint64{
		"heap_alloc_bytes": ms.HeapAlloc,
		"heap_inuse_bytes": ms.HeapInuse,
		"sys_bytes":        ms.Sys,
	})
}
