package manager

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// metricsTLSConfig is the secure metrics server's TLS configuration: the
// certificate and key files when Options name them, re-read when either
// file changes (cert-manager or a projected secret rotates them in place);
// otherwise a self-signed certificate made at start, which a scraper
// accepts only without verification (Prometheus: insecure_skip_verify),
// as with controller-runtime's default.
func metricsTLSConfig(certFile, keyFile string, log logr.Logger) (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// HTTP/1.1 only: a scrape needs nothing of HTTP/2, whose stream
		// handling has had denial-of-service flaws (rapid reset).
		NextProtos: []string{"http/1.1"},
	}
	if certFile == "" {
		cert, err := selfSignedCertificate(time.Now())
		if err != nil {
			return nil, fmt.Errorf("metrics: generating a self-signed certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
		return cfg, nil
	}
	files, err := newCertFiles(certFile, keyFile, log)
	if err != nil {
		return nil, err
	}
	cfg.GetCertificate = files.get
	return cfg, nil
}

// selfSignedCertificate makes an ECDSA P-256 certificate for the names a
// scraper may use (the pod's hostname, localhost, loopback), valid a year.
func selfSignedCertificate(now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	names := []string{"localhost"}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		names = append(names, h)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "kshard-metrics"},
		NotBefore:             now.Add(-time.Hour), // tolerate a scraper's clock behind ours
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              names,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// certFiles serves a certificate and key from files, re-read at the first
// handshake after either file's modification time or size changed. A pair
// that fails to load keeps the previous one (a rotation writes the two
// files one after the other) and is logged.
type certFiles struct {
	certFile, keyFile string
	log               logr.Logger

	mu      sync.Mutex // guards the fields below
	cert    *tls.Certificate
	stamp   [2]fileStamp
	lastErr string
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func newCertFiles(certFile, keyFile string, log logr.Logger) (*certFiles, error) {
	f := &certFiles{certFile: certFile, keyFile: keyFile, log: log}
	stamp, err := f.stat()
	if err == nil {
		err = f.load(stamp)
	}
	if err != nil {
		return nil, fmt.Errorf("metrics: certificate %s and key %s: %w (fix MetricsCertFile and MetricsKeyFile, or leave both empty for a self-signed certificate)", certFile, keyFile, err)
	}
	return f, nil
}

func (f *certFiles) stat() ([2]fileStamp, error) {
	var s [2]fileStamp
	for i, name := range []string{f.certFile, f.keyFile} {
		fi, err := os.Stat(name)
		if err != nil {
			return s, err
		}
		s[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return s, nil
}

// load reads the pair; f.mu is held or f not yet shared.
func (f *certFiles) load(stamp [2]fileStamp) error {
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return err
	}
	f.cert, f.stamp = &cert, stamp
	return nil
}

func (f *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	stamp, err := f.stat()
	if err == nil && stamp != f.stamp {
		err = f.load(stamp)
	}
	if err != nil && err.Error() != f.lastErr {
		f.lastErr = err.Error()
		f.log.Error(err, "metrics: cannot reload the serving certificate; serving the previous one", "certFile", f.certFile, "keyFile", f.keyFile)
	} else if err == nil {
		f.lastErr = ""
	}
	return f.cert, nil
}
