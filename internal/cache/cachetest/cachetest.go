// Package cachetest holds the fixtures the integration tests of kshard's
// caches share (shard/cache and the packages under internal/cache): labelled
// ConfigMaps spread over namespaces whose partitions differ, the Widget
// custom resource's definition (WidgetCRD) and a fake API server's
// selector handling (SelectorServer).
package cachetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// ShardTestLabel marks the ConfigMaps CreateShardingFixture creates, so
// tests list them apart from the control plane's own.
const ShardTestLabel = "kshard.io/sharding-test"

// CreateShardingFixture creates nsCount namespaces of perNS ConfigMaps
// labelled ShardTestLabel each and returns the ConfigMaps.
func CreateShardingFixture(t *testing.T, ctx context.Context, cs kubernetes.Interface, nsCount, perNS int) []corev1.ConfigMap {
	t.Helper()
	var out []corev1.ConfigMap
	for i := range nsCount {
		// The varying part leads: FNV-1a barely moves the high bits of
		// the hash for names that differ only in their last characters,
		// and those would all share one range (see shard's README).
		ns := fmt.Sprintf("n%d-sharding-fixture", i)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for j := range perNS {
			cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("cm-%d", j), Labels: map[string]string{ShardTestLabel: "true"},
			}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, *cm)
		}
	}
	return out
}

// LabelKey is the partition label key of the tests of the caches sharded
// by labels (a ring of 8 partitions).
const LabelKey = "t.kshard.io/xx1-key-p8"

// Await polls cond every 20 ms until it holds, or fails t after timeout
// naming what it waited for and what state reports.
func Await(t *testing.T, what string, timeout time.Duration, cond func() bool, state ...func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		msg := ""
		for _, f := range state {
			msg += "; " + f()
		}
		t.Fatalf("waiting for %s: %v%s", what, err, msg)
	}
}
