package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kshard/kshard/internal/kittools"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options configure a control plane. The zero value is usable.
type Options struct {
	// BinDir is a directory holding the kube-apiserver, etcd and
	// kube-controller-manager binaries to run, as $KSHARD_BIN_DIR names one.
	// Defaults to $KSHARD_BIN_DIR, else to the binaries built from the
	// pinned sources into the cache (built on first use).
	BinDir string
	// Progress receives build and start progress. Defaults to discarding it.
	Progress io.Writer
	// ControllerManager also starts kube-controller-manager with the garbage
	// collector and namespace controllers, for owner-reference cascading
	// deletion and namespace deletion. Defaults to false.
	ControllerManager bool
	// ShardedListAndWatch enables the alpha ShardedListAndWatch feature gate
	// (Kubernetes 1.36 and later) on the API server. Defaults to false. On
	// older binaries Start returns an error wrapping ErrUnsupportedVersion.
	ShardedListAndWatch bool
	// ExtraAPIServerArgs are appended to the API server's command line.
	ExtraAPIServerArgs []string
	// StartTimeout bounds each component's start. Defaults to 60s.
	StartTimeout time.Duration
	// Dir is where the control plane keeps its files. Defaults to a new
	// temporary directory, removed by Stop unless KeepDir is set.
	Dir string
	// KeepDir keeps Dir (logs, etcd data, kubeconfigs) after Stop.
	KeepDir bool
}

func (o *Options) applyDefaults() {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
}

// ControlPlane is a running etcd + kube-apiserver (+ kube-controller-manager).
type ControlPlane struct {
	opts     Options
	bins     kittools.Binaries
	dir      string
	ownsDir  bool
	pki      *pki
	etcdURL  string
	apiPort  int
	kcmPort  int
	adminCfg string
	restrCfg string

	mu        sync.Mutex // guards the process handles below
	etcd      *component
	apiserver *component
	kcm       *component
	apiStarts int
}

// Start builds (if needed) and starts a control plane, returning once the API
// server reports ready. On failure it returns the component's last log lines
// and leaves nothing running.
func Start(ctx context.Context, opts Options) (cp *ControlPlane, err error) {
	opts.applyDefaults()
	var bins kittools.Binaries
	if opts.BinDir != "" {
		if bins, err = kittools.In(opts.BinDir); err != nil {
			return nil, fmt.Errorf("controlplane: Options.BinDir %s: %w", opts.BinDir, err)
		}
	} else if bins, err = kittools.Ensure(ctx, opts.Progress); err != nil {
		return nil, err
	}
	bins.ResolveVersion(ctx)
	if err := checkVersion(opts, bins); err != nil {
		return nil, err
	}
	cp = &ControlPlane{opts: opts, bins: bins, dir: opts.Dir}
	if cp.dir == "" {
		d, err := os.MkdirTemp("", "kshard-controlplane-")
		if err != nil {
			return nil, err
		}
		cp.dir, cp.ownsDir = d, !opts.KeepDir
	} else if err := os.MkdirAll(cp.dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			// Keep the files of a failed start: the logs are the diagnosis.
			cp.ownsDir = false
			_ = cp.Stop()
			err = fmt.Errorf("%w\n(control-plane files kept in %s)", err, cp.dir)
		}
	}()
	if cp.pki, err = newPKI(cp.dir); err != nil {
		return cp, fmt.Errorf("generating certificates: %w", err)
	}
	if err := cp.startEtcd(ctx); err != nil {
		return cp, err
	}
	if err := cp.StartAPIServer(ctx); err != nil {
		return cp, err
	}
	if err := cp.writeKubeconfigs(); err != nil {
		return cp, err
	}
	if opts.ControllerManager {
		if err := cp.startControllerManager(ctx); err != nil {
			return cp, err
		}
	}
	return cp, nil
}

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	clientURL := func(ports []int) string { return "http://127.0.0.1:" + strconv.Itoa(ports[0]) }
	p, ports, err := startBound(ctx, bindAttempt{
		pick: func() ([]int, error) { return pickPorts(2) },
		start: func(ports []int) (*component, error) {
			client, peer := clientURL(ports), "http://127.0.0.1:"+strconv.Itoa(ports[1])
			dataDir := filepath.Join(cp.dir, "etcd-data")
			_ = os.RemoveAll(dataDir)
			return startProcess("etcd", filepath.Join(cp.dir, "etcd.log"), cp.bins.Etcd,
				"--name=kshard", "--data-dir="+dataDir,
				"--listen-client-urls="+client, "--advertise-client-urls="+client,
				"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
				"--initial-cluster=kshard="+peer,
				// Test data is disposable; fsync would dominate write latency.
				"--unsafe-no-fsync=true", "--log-level=warn",
			)
		},
		ready: func(ctx context.Context, p *component, ports []int) error {
			return waitHTTP(ctx, p, cp.opts.StartTimeout, clientURL(ports)+"/health", nil, func(body string) bool {
				return strings.Contains(body, `"health":"true"`)
			})
		},
	})
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.etcd, cp.etcdURL = p, clientURL(ports)
	cp.mu.Unlock()
	return nil
}

// StartAPIServer starts the API server, on the same port as before when it
// was stopped with StopAPIServer, and waits for /readyz.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	if cp.apiserver != nil && cp.apiserver.Running() {
		cp.mu.Unlock()
		return errors.New("kube-apiserver is already running")
	}
	port, restart := cp.apiPort, cp.apiStarts > 0
	cp.mu.Unlock()
	attempt := bindAttempt{
		pick:  func() ([]int, error) { return pickPorts(1) },
		start: func(ports []int) (*component, error) { return cp.launchAPIServer(ports[0]) },
		ready: func(ctx context.Context, p *component, ports []int) error {
			return waitHTTP(ctx, p, cp.opts.StartTimeout, fmt.Sprintf("https://127.0.0.1:%d/readyz", ports[0]), cp.adminHTTPClient(), func(body string) bool {
				return strings.TrimSpace(body) == "ok"
			})
		},
	}
	if restart {
		// Clients must keep their address: when the old port was taken
		// while the server was down, wait for it rather than move.
		attempt.pick = func() ([]int, error) { return []int{port}, nil }
		attempt.pause = time.Second
	}
	p, ports, err := startBound(ctx, attempt)
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.apiserver, cp.apiPort = p, ports[0]
	cp.apiStarts++
	cp.mu.Unlock()
	return nil
}

func (cp *ControlPlane) launchAPIServer(port int) (*component, error) {
	args := []string{
		"--etcd-servers=" + cp.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + cp.pki.serverCertFile,
		"--tls-private-key-file=" + cp.pki.serverKeyFile,
		"--client-ca-file=" + cp.pki.caFile,
		"--token-auth-file=" + cp.pki.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + cp.pki.saPublicFile,
		"--service-account-signing-key-file=" + cp.pki.saPrivateFile,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + filepath.Join(cp.dir, "apiserver-certs"),
		"--profiling=false",
	}
	if cp.opts.ShardedListAndWatch {
		args = append(args, "--feature-gates=ShardedListAndWatch=true")
	}
	args = append(args, cp.opts.ExtraAPIServerArgs...)
	return startProcess("kube-apiserver", filepath.Join(cp.dir, "kube-apiserver.log"), cp.bins.APIServer, args...)
}

// StopAPIServer stops the API server alone (etcd keeps running), for outage
// tests. Clients see connection refused until StartAPIServer.
func (cp *ControlPlane) StopAPIServer() {
	cp.mu.Lock()
	p := cp.apiserver
	cp.mu.Unlock()
	p.stop(10 * time.Second)
}

// KillAPIServer ends the API server at once with SIGKILL (etcd keeps
// running), an abrupt outage: unlike StopAPIServer no request is drained.
// StartAPIServer brings it back on the same address.
func (cp *ControlPlane) KillAPIServer() {
	cp.mu.Lock()
	p := cp.apiserver
	cp.mu.Unlock()
	p.kill()
}

// StartControllerManager starts kube-controller-manager (garbage collector
// and namespace controllers) on a control plane started without it. Tests
// that install CRDs start it afterwards: its garbage collector discovers new
// kinds only every 30 seconds, so owner references of a kind installed after
// it started are not collected for up to that long.
func (cp *ControlPlane) StartControllerManager(ctx context.Context) error {
	cp.mu.Lock()
	running := cp.kcm != nil
	cp.mu.Unlock()
	if running {
		return errors.New("controlplane: kube-controller-manager is already running")
	}
	return cp.startControllerManager(ctx)
}

func (cp *ControlPlane) startControllerManager(ctx context.Context) error {
	p, ports, err := startBound(ctx, bindAttempt{
		pick: func() ([]int, error) { return pickPorts(1) },
		start: func(ports []int) (*component, error) {
			return startProcess("kube-controller-manager", filepath.Join(cp.dir, "kube-controller-manager.log"), cp.bins.ControllerManager,
				"--kubeconfig="+cp.adminCfg,
				"--controllers=garbage-collector-controller,namespace-controller",
				"--leader-elect=false",
				"--bind-address=127.0.0.1",
				"--secure-port="+strconv.Itoa(ports[0]),
				"--authentication-skip-lookup=true",
				"--authorization-always-allow-paths=/healthz,/readyz,/livez",
				"--concurrent-gc-syncs=5",
			)
		},
		ready: func(ctx context.Context, p *component, ports []int) error {
			insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
			return waitHTTP(ctx, p, cp.opts.StartTimeout, fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0]), insecure, func(body string) bool {
				return strings.TrimSpace(body) == "ok"
			})
		},
	})
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.kcm, cp.kcmPort = p, ports[0]
	cp.mu.Unlock()
	return nil
}

// Stop stops every component (whole process groups) and removes the
// control plane's directory unless it is to be kept.
func (cp *ControlPlane) Stop() error {
	cp.mu.Lock()
	kcm, api, etcd := cp.kcm, cp.apiserver, cp.etcd
	cp.mu.Unlock()
	kcm.stop(5 * time.Second)
	api.stop(10 * time.Second)
	etcd.stop(5 * time.Second)
	if cp.ownsDir {
		return os.RemoveAll(cp.dir)
	}
	return nil
}

// KeepFiles makes Stop leave the directory (logs, kubeconfigs) in place.
func (cp *ControlPlane) KeepFiles() { cp.ownsDir = false }

// Dir is the control plane's working directory (logs, kubeconfigs, certs).
func (cp *ControlPlane) Dir() string { return cp.dir }

// Host is the API server's URL.
func (cp *ControlPlane) Host() string { return fmt.Sprintf("https://127.0.0.1:%d", cp.apiPort) }

// KubernetesVersion is the version of the running binaries (v1.36.3), from
// the cache's manifest or kube-apiserver --version; empty when the binary
// does not say (an unstamped build).
func (cp *ControlPlane) KubernetesVersion() string { return cp.bins.KubernetesVersion }

// Config returns a fresh rest.Config for the admin identity (system:masters).
// QPS and burst are raised above client-go's defaults so tests are not
// throttled client-side.
func (cp *ControlPlane) Config() *rest.Config { return cp.config(cp.pki.adminToken) }

// RestrictedConfig returns a rest.Config for RestrictedUser, who has no
// permissions beyond discovery unless a test grants them through RBAC.
func (cp *ControlPlane) RestrictedConfig() *rest.Config { return cp.config(cp.pki.restrictToken) }

// KubeconfigPath is a kubeconfig file for the admin identity, for kubectl.
func (cp *ControlPlane) KubeconfigPath() string { return cp.adminCfg }

// RestrictedKubeconfigPath is a kubeconfig file for RestrictedUser.
func (cp *ControlPlane) RestrictedKubeconfigPath() string { return cp.restrCfg }

func (cp *ControlPlane) config(token string) *rest.Config {
	return &rest.Config{
		Host:            cp.Host(),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), cp.pki.caPEM...)},
		QPS:             1000,
		Burst:           2000,
	}
}

func (cp *ControlPlane) writeKubeconfigs() error {
	cp.adminCfg = filepath.Join(cp.dir, "admin.kubeconfig")
	cp.restrCfg = filepath.Join(cp.dir, "restricted.kubeconfig")
	for path, user := range map[string]struct{ name, token string }{
		cp.adminCfg: {adminUser, cp.pki.adminToken},
		cp.restrCfg: {RestrictedUser, cp.pki.restrictToken},
	} {
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["kshard"] = &clientcmdapi.Cluster{Server: cp.Host(), CertificateAuthorityData: cp.pki.caPEM}
		cfg.AuthInfos[user.name] = &clientcmdapi.AuthInfo{Token: user.token}
		cfg.Contexts["kshard"] = &clientcmdapi.Context{Cluster: "kshard", AuthInfo: user.name, Namespace: "default"}
		cfg.CurrentContext = "kshard"
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			return fmt.Errorf("writing kubeconfig: %w", err)
		}
	}
	return nil
}

func (cp *ControlPlane) adminHTTPClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.pki.caPEM)
	return &http.Client{
		Timeout: 2 * time.Second,
		Transport: &authTransport{token: cp.pki.adminToken, base: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool},
		}},
	}
}

type authTransport struct {
	token string
	base  http.RoundTripper
}

func (t *authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.base.RoundTrip(r)
}

// waitHTTP polls url until ok(body) holds, the process exits, or the timeout
// passes; errors carry the component's last log lines.
func waitHTTP(ctx context.Context, p *component, timeout time.Duration, url string, client *http.Client, ok func(string) bool) error {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		if !p.Running() {
			return p.exitError()
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if ok(string(body)) {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %.300s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s (last answer: %s); last log lines (%s):\n%s", p.Name(), timeout, last, p.LogPath(), p.Tail(30))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pickPorts is freePorts, replaceable in tests to simulate a port clash.
var pickPorts = freePorts
