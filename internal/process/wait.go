package process

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// pollInterval is how often WaitLog reads new output. A log file gives no
// notification, and a tenth of a second is well below any start-up a caller
// waits for.
const pollInterval = 50 * time.Millisecond

// Wait waits until the process exits or ctx ends.
func (p *Process) Wait(ctx context.Context) (Exit, error) {
	select {
	case <-p.done:
		return p.exit, nil
	case <-ctx.Done():
		return Exit{}, fmt.Errorf("waiting for %s to exit: %w", p.name, ctx.Err())
	}
}

// WaitLog waits until match accepts a line of the process's log (read from
// the beginning) and returns that line. It fails if the process exits
// without such a line or ctx ends first; the error quotes the log's end.
func (p *Process) WaitLog(ctx context.Context, what string, match func(line []byte) bool) ([]byte, error) {
	f, err := os.Open(p.logPath)
	if err != nil {
		return nil, fmt.Errorf("reading the log of %s: %w", p.name, err)
	}
	defer f.Close()
	var pending []byte // an unterminated last line, completed by later reads
	buf := make([]byte, 32<<10)
	scan := func() ([]byte, bool) {
		for {
			n, err := f.Read(buf)
			pending = append(pending, buf[:n]...)
			for {
				i := bytes.IndexByte(pending, '\n')
				if i < 0 {
					break
				}
				line := pending[:i]
				pending = pending[i+1:]
				if match(line) {
					return append([]byte(nil), line...), true
				}
			}
			if n == 0 || err == io.EOF {
				return nil, false
			}
		}
	}
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		if line, ok := scan(); ok {
			return line, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: no %s in its log (%w); last log lines (%s):\n%s", p.name, what, ctx.Err(), p.logPath, p.Tail(20))
		case <-p.done:
			// The output is complete once the process is reaped.
			if line, ok := scan(); ok {
				return line, nil
			}
			if len(pending) > 0 && match(pending) {
				return pending, nil
			}
			return nil, fmt.Errorf("%s %s before logging %s; last log lines (%s):\n%s", p.name, p.exit, what, p.logPath, p.Tail(20))
		case <-tick.C:
		}
	}
}

// Names of the servers a kshard manager reports in its "serving" line.
const (
	ServerMetrics = "metrics"
	ServerProbe   = "health probe"
)

// ServingAddr waits for the "serving" line a kshard manager logs (JSON,
// with its default logger) once it has bound server (ServerMetrics or
// ServerProbe), and returns the address to dial: a wildcard host (":0"
// binds every interface) becomes 127.0.0.1.
func (p *Process) ServingAddr(ctx context.Context, server string) (string, error) {
	var addr string
	_, err := p.WaitLog(ctx, fmt.Sprintf("%q server address", server), func(line []byte) bool {
		a, ok := ParseServing(line, server)
		addr = a
		return ok
	})
	return addr, err
}

// ParseServing returns the dialable address in a manager's "serving" log
// line for server, and whether line is one.
func ParseServing(line []byte, server string) (string, bool) {
	if len(line) == 0 || line[0] != '{' {
		return "", false
	}
	var l struct {
		Msg     string `json:"msg"`
		Server  string `json:"server"`
		Address string `json:"address"`
	}
	if json.Unmarshal(line, &l) != nil || l.Msg != "serving" || l.Server != server {
		return "", false
	}
	host, port, err := net.SplitHostPort(l.Address)
	if err != nil {
		return "", false
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), true
}
