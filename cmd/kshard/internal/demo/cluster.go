package demo

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/cmd/example-operator/api/v1alpha1"
)

var (
	crdGVR    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	widgetGVR = v1alpha1.GroupVersion.WithResource("widgets")
)

// pollInterval is how often the demo re-reads a condition that has no
// event to wait on (a CRD becoming served).
const pollInterval = 100 * time.Millisecond

// installCRD creates the Widget CRD and returns once Widgets can be listed:
// Established alone does not mean the API server serves the resource yet.
func installCRD(ctx context.Context, dyn dynamic.Interface) error {
	crd := &unstructured.Unstructured{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(v1alpha1.CRD), 4096).Decode(&crd.Object); err != nil {
		return fmt.Errorf("decoding the embedded Widget CRD: %w", err)
	}
	_, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the Widget CRD: %w", err)
	}
	err = wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, nil // transient while the CRD is being set up
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				_, err := dyn.Resource(widgetGVR).List(ctx, metav1.ListOptions{Limit: 1})
				return err == nil, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the Widget CRD to be served: %w", err)
	}
	return nil
}

func createNamespace(ctx context.Context, client kubernetes.Interface, name string) error {
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// widgetName is the name of the i-th demo Widget.
func widgetName(i int) string { return fmt.Sprintf("widget-%04d", i) }

// createWidgets creates n Widgets with a few concurrent writers and returns
// the first error. It returns only after every writer has stopped.
func createWidgets(ctx context.Context, dyn dynamic.Interface, namespace string, n int) error {
	const writers = 8
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	colors := []string{"red", "green", "blue", "amber"}
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				w := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": v1alpha1.GroupVersion.String(),
					"kind":       "Widget",
					"metadata":   map[string]any{"name": widgetName(i), "namespace": namespace},
					"spec":       map[string]any{"color": colors[i%len(colors)], "size": int64(i%10 + 1)},
				}}
				_, err := dyn.Resource(widgetGVR).Namespace(namespace).Create(ctx, w, metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					errOnce.Do(func() { firstErr = fmt.Errorf("creating Widget %s: %w", widgetName(i), err); cancel() })
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// widgetProgress counts the Widgets whose status.observedGeneration equals
// metadata.generation, and who reconciled them last.
func widgetProgress(objs []any) (done int, by map[string]int) {
	by = map[string]int{}
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		if observed == u.GetGeneration() && observed > 0 {
			done++
			who, _, _ := unstructured.NestedString(u.Object, "status", "reconciledBy")
			by[who]++
		}
	}
	return done, by
}
