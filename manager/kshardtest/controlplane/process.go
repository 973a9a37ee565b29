package controlplane

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kshard/kshard/internal/process"
)

// component is one control-plane executable, run by the process runner.
type component struct {
	*process.Process
}

func startProcess(name, logPath, bin string, args ...string) (*component, error) {
	p, err := process.Start(process.Options{Name: name, Path: bin, Args: args, LogPath: logPath})
	if err != nil {
		return nil, err
	}
	return &component{p}, nil
}

// stop asks the process group to terminate and kills it after grace.
func (c *component) stop(grace time.Duration) {
	if c != nil {
		_, _ = c.Stop(grace)
	}
}

// kill ends the process group at once, as a crash would.
func (c *component) kill() {
	if c != nil {
		c.Kill()
	}
}

// errAddrInUse marks a start that failed because a port was taken between
// choosing it and binding it; the caller retries with new ports.
var errAddrInUse = errors.New("address already in use")

func (c *component) exitError() error {
	log := c.Tail(30)
	exit, _ := c.Exited()
	if strings.Contains(log, "address already in use") {
		return fmt.Errorf("%s: %w\n%s", c.Name(), errAddrInUse, log)
	}
	return fmt.Errorf("%s %s early; last log lines (%s):\n%s", c.Name(), exit, c.LogPath(), log)
}

// portAttempts bounds retries when a chosen free port is taken before the
// component binds it.
const portAttempts = 4

// bindAttempt is how to start one component on ports it binds itself.
type bindAttempt struct {
	// pick chooses the ports of one attempt.
	pick func() ([]int, error)
	// start launches the component on them.
	start func(ports []int) (*component, error)
	// ready waits until it serves; an error wrapping errAddrInUse means a
	// port was taken between pick and bind.
	ready func(ctx context.Context, p *component, ports []int) error
	// pause is waited before each retry (none when zero).
	pause time.Duration
}

// startBound is the one bind-retry loop of the control plane: etcd,
// kube-apiserver and kube-controller-manager cannot bind port 0, so a port
// picked free may be taken before they bind it. It starts the component
// and, when it fails on a taken port, kills it and tries again (up to
// portAttempts, with new ports from pick); any other failure is returned at
// once. It returns the running component and the ports it bound.
func startBound(ctx context.Context, a bindAttempt) (*component, []int, error) {
	var lastErr error
	for attempt := 0; attempt < portAttempts; attempt++ {
		if attempt > 0 && a.pause > 0 {
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(a.pause):
			}
		}
		ports, err := a.pick()
		if err != nil {
			return nil, nil, err
		}
		p, err := a.start(ports)
		if err != nil {
			return nil, nil, err
		}
		if err = a.ready(ctx, p, ports); err == nil {
			return p, ports, nil
		}
		p.kill()
		lastErr = err
		if !errors.Is(err, errAddrInUse) {
			return nil, nil, err
		}
	}
	return nil, nil, lastErr
}

// lowestPort keeps the control plane above well-known and registered
// service ports a machine is likely to run.
const lowestPort = 20000

// freePorts returns n distinct loopback ports that were free a moment ago,
// for etcd, kube-apiserver and kube-controller-manager, which cannot bind
// port 0 and report what they got. The caller retries on a clash.
//
// The ports come from below the kernel's ephemeral range when there is
// room: a port the kernel hands out for ":0" is also what it gives the
// local end of outgoing connections, so in the moment between choosing and
// binding, any of the hundreds of client connections of a test run could
// take it. Below the range only another control plane choosing at the same
// time can, and the retry covers that. (Replicas bind port 0 themselves.)
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	take := func(addr string) bool {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return false
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		return true
	}
	low := ephemeralLow()
	for attempt := 0; len(ports) < n && low > lowestPort && attempt < 50*n; attempt++ {
		take(net.JoinHostPort("127.0.0.1", strconv.Itoa(lowestPort+rand.IntN(low-lowestPort))))
	}
	for len(ports) < n {
		if !take("127.0.0.1:0") {
			return nil, errors.New("finding a free loopback port: the kernel has none left")
		}
	}
	return ports, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default when it cannot be read).
func ephemeralLow() int {
	low := 32768
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return low
	}
	if f := strings.Fields(string(data)); len(f) == 2 {
		if v, err := strconv.Atoi(f[0]); err == nil && v > 0 {
			low = v
		}
	}
	return low
}
