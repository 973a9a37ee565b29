package membership

import (
	"context"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// shared is the control plane of the integration tests that do not disturb
// it; each of them works in its own namespace. It is started on first use,
// so that running only unit tests starts none, and stopped by TestMain.
var shared struct {
	once sync.Once
	cp   *controlplane.ControlPlane
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.cp != nil {
		if code != 0 {
			shared.cp.KeepFiles()
			os.Stderr.WriteString("control-plane files kept in " + shared.cp.Dir() + "\n")
		}
		_ = shared.cp.Stop()
	}
	os.Exit(code)
}

func sharedControlPlane(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		start := time.Now()
		shared.cp, shared.err = controlplane.Start(ctx, controlplane.Options{Progress: os.Stderr})
		t.Logf("shared control plane up in %s", time.Since(start).Round(time.Millisecond))
	})
	if shared.err != nil {
		t.Fatalf("starting control plane: %v", shared.err)
	}
	return shared.cp
}

var notDNS = regexp.MustCompile(`[^a-z0-9]+`)

// testNamespace creates a namespace named after the test.
func testNamespace(t *testing.T, admin kubernetes.Interface) string {
	t.Helper()
	name := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 63 {
		name = strings.Trim(name[len(name)-63:], "-")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := admin.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}
