package faultproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// echoServer echoes every connection on a loopback port until the test
// ends, and counts the connections it accepted.
type echoServer struct {
	ln net.Listener
	wg sync.WaitGroup

	mu    sync.Mutex // guards conns
	conns []net.Conn
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		e.mu.Lock()
		for _, c := range e.conns {
			c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

func (e *echoServer) accepted() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.conns)
}

func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("closing proxy: %v", err)
		}
	})
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads it back within timeout.
func roundTrip(c net.Conn, msg string, timeout time.Duration) error {
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return errors.New("echo mismatch: " + string(buf))
	}
	return nil
}

func TestPassForwardsBothWays(t *testing.T) {
	echo := startEcho(t)
	p := startProxy(t, echo.ln.Addr().String())
	c := dial(t, p.Addr())
	for _, msg := range []string{"hello", "again"} {
		if err := roundTrip(c, msg, 2*time.Second); err != nil {
			t.Fatalf("round trip %q through a passing proxy: %v", msg, err)
		}
	}
	if p.Accepted() != 1 || echo.accepted() != 1 {
		t.Errorf("proxy accepted %d and target %d connections, want 1 and 1", p.Accepted(), echo.accepted())
	}
}

func TestDelayHoldsEveryChunk(t *testing.T) {
	echo := startEcho(t)
	p := startProxy(t, echo.ln.Addr().String())
	c := dial(t, p.Addr())
	if err := roundTrip(c, "warm", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	const d = 150 * time.Millisecond
	p.Delay(d)
	start := time.Now()
	if err := roundTrip(c, "slow", 5*time.Second); err != nil {
		t.Fatalf("round trip through a delaying proxy: %v", err)
	}
	// Delayed on the way there and on the way back.
	if took := time.Since(start); took < 2*d {
		t.Errorf("round trip took %s through a %s delay each way, want ≥ %s", took, d, 2*d)
	}
	p.Heal()
	if m, _ := p.Mode(); m != Pass {
		t.Errorf("mode after Heal is %s, want pass", m)
	}
}

// TestBlackholeHoldsConnectionsOpenUntilHeal is the partition contract: no
// byte passes on established or new connections, none is closed while the
// blackhole lasts, and Heal closes them so the client reconnects.
func TestBlackholeHoldsConnectionsOpenUntilHeal(t *testing.T) {
	echo := startEcho(t)
	p := startProxy(t, echo.ln.Addr().String())
	established := dial(t, p.Addr())
	if err := roundTrip(established, "before", 2*time.Second); err != nil {
		t.Fatal(err)
	}

	p.Blackhole()
	err := roundTrip(established, "during", 300*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("round trip on an established connection during the blackhole: got %v, want a timeout (open but silent)", err)
	}
	fresh := dial(t, p.Addr()) // accepted, so the dial succeeds
	err = roundTrip(fresh, "new", 300*time.Millisecond)
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("round trip on a new connection during the blackhole: got %v, want a timeout (stalled)", err)
	}
	if got := echo.accepted(); got != 1 {
		t.Errorf("the target accepted %d connections during the blackhole, want only the first", got)
	}

	p.Heal()
	for name, c := range map[string]net.Conn{"established": established, "stalled": fresh} {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 64)); err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s connection after Heal: read returned %v, want it closed", name, err)
		}
	}
	if err := roundTrip(dial(t, p.Addr()), "after", 2*time.Second); err != nil {
		t.Fatalf("round trip on a new connection after Heal: %v", err)
	}
}

func TestCloseEndsConnectionsAndRefusesNewOnes(t *testing.T) {
	echo := startEcho(t)
	p, err := Start(echo.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	if err := roundTrip(c, "x", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	stalled := dial(t, p.Addr())
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, conn := range []net.Conn{c, stalled} {
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("connection after Close: read returned %v, want it closed", err)
		}
	}
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c.Close()
		t.Error("dialing a closed proxy succeeded")
	}
}
