package harness

import (
	"fmt"
	"net/url"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kshard/kshard/e2e/faultproxy"
)

// proxy is one identity's fault proxy and the kubeconfig that points at it.
type proxy struct {
	*faultproxy.Proxy
	kubeconfig string
}

// Proxy returns the fault proxy between identity and the API server, which
// exists once identity has been started with Options.Proxies; nil otherwise.
// Blackhole it to cut that replica off; Heal it to reconnect.
func (h *Harness) Proxy(identity string) *faultproxy.Proxy {
	h.mu.Lock()
	defer h.mu.Unlock()
	if px := h.proxies[identity]; px != nil {
		return px.Proxy
	}
	return nil
}

// proxyFor returns identity's proxy, starting it and writing its kubeconfig
// on first use. The API server's certificate names 127.0.0.1, as the proxy
// listens, so TLS passes through unchanged.
func (h *Harness) proxyFor(identity string) (*proxy, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if px := h.proxies[identity]; px != nil {
		return px, nil
	}
	cfg := h.cp.Config()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("parsing the API server address %q: %w", cfg.Host, err)
	}
	fp, err := faultproxy.Start(u.Host)
	if err != nil {
		return nil, err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kshard"] = &clientcmdapi.Cluster{Server: "https://" + fp.Addr(), CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["kshard"] = &clientcmdapi.Context{Cluster: "kshard", AuthInfo: "admin", Namespace: h.opts.Namespace}
	kc.CurrentContext = "kshard"
	path := filepath.Join(h.dir, identity+"-via-proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		_ = fp.Close()
		return nil, fmt.Errorf("writing %s's kubeconfig: %w", identity, err)
	}
	px := &proxy{Proxy: fp, kubeconfig: path}
	h.proxies[identity] = px
	return px, nil
}

// closeProxies closes every proxy; replicas must be dead by then.
func (h *Harness) closeProxies() {
	h.mu.Lock()
	proxies := h.proxies
	h.proxies = map[string]*proxy{}
	h.mu.Unlock()
	for _, px := range proxies {
		_ = px.Close()
	}
}
