package main

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// benchObjectCRD is the BenchObject CustomResourceDefinition.
//
//go:embed benchobject-crd.yaml
var benchObjectCRD []byte

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installBenchObjects creates the BenchObject CRD on b's control plane (one
// there already is kept) and waits until the API server serves the kind.
func (b *bench) installBenchObjects(ctx context.Context) error {
	crd := &unstructured.Unstructured{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(benchObjectCRD), 4096).Decode(&crd.Object); err != nil {
		return fmt.Errorf("decoding benchobject-crd.yaml: %w", err)
	}
	dyn, err := dynamic.NewForConfig(b.cp.Config())
	if err != nil {
		return err
	}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the BenchObject CRD: %w", err)
	}
	gv := benchObjects.GVR.GroupVersion().String()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		list, err := b.client.Discovery().ServerResourcesForGroupVersion(gv)
		if err != nil {
			return false, nil // not served yet
		}
		return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == benchObjects.GVR.Resource }), nil
	})
	if err != nil {
		return fmt.Errorf("the API server did not serve %s %s within a minute of creating its CRD: %w", gv, benchObjects.GVR.Resource, err)
	}
	return nil
}

// withKind returns a bench on b's control plane (same parameters,
// operators, namespaces and object layout) whose objects are of kind,
// installing the kind first if it is BenchObject. It starts with no
// objects of its own and no observer.
func (b *bench) withKind(ctx context.Context, kind objectKind) (*bench, error) {
	objs, err := newObjectClient(b.cp.Config(), kind)
	if err != nil {
		return nil, err
	}
	if kind == benchObjects {
		if err := b.installBenchObjects(ctx); err != nil {
			return nil, err
		}
	}
	return &bench{p: b.p, cp: b.cp, client: b.client, objs: objs, dir: b.dir, ns: b.ns, spread: b.spread, ring: b.ring, parent: b}, nil
}
