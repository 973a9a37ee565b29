package compat

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// EnvSummary names a file the measurement's line is appended to, for
// hack/compat.sh (go test shows a passing test's log only with -v).
const EnvSummary = "KSHARD_COMPAT_SUMMARY"

const (
	listObjects = 500
	listPage    = 100
)

// TestPagedConsistentListCost measures what a replica's first LIST costs
// the control plane on this version: a paged LIST at a consistent read
// (resourceVersion unset, pages of 100), as the labels-mode cache and an
// informer send at start. Before 1.34 the pages after the first came from
// etcd; from 1.34 (ListFromCacheSnapshot) the watch cache serves them, so
// etcd sees at most a revision read. The figures are recorded, not
// asserted: they are what differs between versions. The test fails when the
// pages do not add up to every object exactly once.
func TestPagedConsistentListCost(t *testing.T) {
	cp := controlplane.ForTest(t, controlplane.Options{})
	cs := kubernetes.NewForConfigOrDie(cp.Config())
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	ns := "list-cost"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createAll(ctx, t, cs, ns)

	before := scrape(ctx, t, cs)
	seen := map[string]int{}
	pages, cont := 0, ""
	for {
		l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: listPage, Continue: cont})
		if err != nil {
			t.Fatalf("page %d: %v", pages+1, err)
		}
		pages++
		for _, cm := range l.Items {
			seen[cm.Name]++
		}
		if cont = l.Continue; cont == "" {
			break
		}
	}
	after := scrape(ctx, t, cs)
	if len(seen) != listObjects {
		t.Fatalf("the pages held %d distinct ConfigMaps, want %d", len(seen), listObjects)
	}
	for name, n := range seen {
		if n != 1 {
			t.Fatalf("%s came %d times", name, n)
		}
	}

	// Every etcd request during the LIST, by type and operation: the
	// revision read of a consistent read from the cache is not labelled with
	// the resource on every version.
	etcd := deltaBy(before, after, "etcd_requests_total", "", "", "type", "operation")
	var ops []string
	total := 0.0
	for op, n := range etcd {
		if n > 0 {
			ops = append(ops, fmt.Sprintf("%s=%g", op, n))
			total += n
		}
	}
	sort.Strings(ops)
	lists := deltaBy(before, after, "apiserver_request_total", "resource", "configmaps", "verb")["LIST"]
	line := fmt.Sprintf("list cost: kubernetes=%s objects=%d page=%d pages=%d list_requests=%g etcd_requests=%g etcd_ops=%s",
		cp.KubernetesVersion(), listObjects, listPage, pages, lists, total, strings.Join(ops, ","))
	t.Log(line)
	if f := os.Getenv(EnvSummary); f != "" {
		out, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		fmt.Fprintln(out, line)
	}
}

// createAll creates listObjects ConfigMaps, eight at a time.
func createAll(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, listObjects)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + strconv.Itoa(i)}, Data: map[string]string{"i": strconv.Itoa(i)}}
				if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range listObjects {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("creating ConfigMaps: %v", err)
	}
}

func scrape(ctx context.Context, t *testing.T, cs kubernetes.Interface) map[string]*dto.MetricFamily {
	t.Helper()
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("scraping the API server's /metrics: %v", err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("parsing the API server's /metrics: %v", err)
	}
	return mfs
}

// deltaBy sums name's counters whose label match has value want (every
// counter when match is empty), grouped by the values of the labels by
// (joined with "/"), and returns after minus before per group.
func deltaBy(before, after map[string]*dto.MetricFamily, name, match, want string, by ...string) map[string]float64 {
	sum := func(mfs map[string]*dto.MetricFamily) map[string]float64 {
		out := map[string]float64{}
		mf := mfs[name]
		if mf == nil {
			return out
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if match != "" && labels[match] != want {
				continue
			}
			key := make([]string, len(by))
			for i, b := range by {
				key[i] = labels[b]
			}
			out[strings.Join(key, "/")] += m.GetCounter().GetValue()
		}
		return out
	}
	b, a := sum(before), sum(after)
	for k, v := range a {
		a[k] = v - b[k]
	}
	return a
}
