package faultproxy

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"
)

// Mode is what a Proxy does with the bytes of its connections.
type Mode int

const (
	// Pass forwards bytes both ways as they come.
	Pass Mode = iota
	// Delay holds every chunk it reads for the delay before forwarding it.
	Delay
	// Blackhole forwards nothing: established connections stay open but
	// silent both ways, and new ones are accepted and left stalled, as a
	// network partition looks to both ends.
	Blackhole
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Delay:
		return "delay"
	case Blackhole:
		return "blackhole"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// dialTimeout bounds the dial to the target for each accepted connection.
const dialTimeout = 5 * time.Second

// Proxy forwards connections accepted on a loopback port to a target
// address. Its methods are safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // cancelled by Close; bounds dials
	cancel context.CancelFunc

	mu       sync.Mutex // guards the fields below and links' membership
	mode     Mode
	delay    time.Duration
	changed  chan struct{} // closed and replaced on every mode change; pumps held by Blackhole wait on it
	links    map[*link]struct{}
	closed   bool
	accepted int

	// wg counts the accept loop and every link's dial and pump goroutines;
	// Close waits for all of them.
	wg sync.WaitGroup
}

// link is one accepted connection and, unless it was stalled at accept, its
// connection to the target.
type link struct {
	client net.Conn
	done   chan struct{} // closed by close

	mu       sync.Mutex // guards upstream and closed, so a dial racing close cannot leak
	upstream net.Conn
	closed   bool
}

// close closes both ends once.
func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	close(l.done)
	_ = l.client.Close()
	if l.upstream != nil {
		_ = l.upstream.Close()
	}
}

// attach sets the link's upstream, or reports false (and closes up) if the
// link was closed while dialing.
func (l *link) attach(up net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = up.Close()
		return false
	}
	l.upstream = up
	return true
}

// Start listens on a free loopback port and forwards what it accepts to
// target (host:port), in Pass mode, until Close.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listening on loopback: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{target: target, ln: ln, ctx: ctx, cancel: cancel, changed: make(chan struct{}), links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the proxy's listening address, host:port on 127.0.0.1.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Mode returns the current mode and, in Delay mode, the delay.
func (p *Proxy) Mode() (Mode, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay
}

// Accepted counts the connections accepted so far.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Blackhole stops forwarding on every connection, established or new,
// without closing any, until Heal.
func (p *Proxy) Blackhole() { p.setMode(Blackhole, 0) }

// Delay forwards every chunk d after reading it, until Heal or Blackhole.
func (p *Proxy) Delay(d time.Duration) { p.setMode(Delay, d) }

// Heal returns to Pass. Coming out of Blackhole it closes every connection
// the blackhole held (their peers would have timed them out by now), so the
// client reconnects through the healed proxy.
func (p *Proxy) Heal() { p.setMode(Pass, 0) }

func (p *Proxy) setMode(m Mode, d time.Duration) {
	p.mu.Lock()
	var stalled []*link
	if p.mode == Blackhole && m != Blackhole {
		for l := range p.links {
			stalled = append(stalled, l)
			delete(p.links, l)
		}
	}
	p.mode, p.delay = m, d
	old := p.changed
	p.changed = make(chan struct{})
	p.mu.Unlock()
	// Close the held links before releasing their pumps, so no byte read
	// during the blackhole reaches the other end afterwards.
	for _, l := range stalled {
		l.close()
	}
	close(old)
}

// Close stops accepting, closes every connection and waits for all of the
// proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
		delete(p.links, l)
	}
	p.mu.Unlock()
	p.cancel()
	err := p.ln.Close()
	for _, l := range links {
		l.close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // the listener is closed
		}
		l := &link{client: c, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			return
		}
		p.accepted++
		p.links[l] = struct{}{}
		stall := p.mode == Blackhole
		p.mu.Unlock()
		if stall {
			// Held open and unread: the client's handshake hangs as it
			// would against an unreachable server. Heal or Close closes it.
			continue
		}
		p.wg.Add(1)
		go p.connect(l)
	}
}

// connect dials the target for l and pumps both ways until either side
// ends, then forgets l.
func (p *Proxy) connect(l *link) {
	defer p.wg.Done()
	defer p.forget(l)
	ctx, cancel := context.WithTimeout(p.ctx, dialTimeout)
	var d net.Dialer
	up, err := d.DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		return // the client sees its connection closed, as on a refused dial
	}
	if !l.attach(up) {
		return
	}
	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); p.pump(l, up, l.client) }()
	go func() { defer pumps.Done(); p.pump(l, l.client, up) }()
	pumps.Wait()
}

// forget closes l and drops it from the proxy's set.
func (p *Proxy) forget(l *link) {
	l.close()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// pump copies src to dst through the gate until an error, then closes the
// link so the other direction ends too.
func (p *Proxy) pump(l *link, dst, src net.Conn) {
	defer l.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate(l) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// gate holds a chunk as the mode says and reports whether to forward it
// (false once the link is closed).
func (p *Proxy) gate(l *link) bool {
	delayed := false
	for {
		p.mu.Lock()
		mode, delay, changed := p.mode, p.delay, p.changed
		p.mu.Unlock()
		switch {
		case mode == Blackhole:
			select {
			case <-changed:
				continue // re-read the mode
			case <-l.done:
				return false
			}
		case mode == Delay && !delayed:
			// Delayed once; a blackhole starting meanwhile still holds it.
			delayed = true
			t := time.NewTimer(delay)
			select {
			case <-t.C:
				continue
			case <-l.done:
				t.Stop()
				return false
			}
		default:
			select {
			case <-l.done:
				return false
			default:
				return true
			}
		}
	}
}
