package cachetest

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// WidgetGV is the group and version of Widget, the custom resource of the
// caches' tests (WidgetCRD).
var WidgetGV = schema.GroupVersion{Group: "example.kshard.io", Version: "v1"}

// WidgetCRD is the CustomResourceDefinition of Widget
// (example.kshard.io/v1), a test type, with any fields allowed.
func WidgetCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets." + WidgetGV.Group},
		"spec": map[string]any{
			"group": WidgetGV.Group, "scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": WidgetGV.Version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CreateCRD creates a CustomResourceDefinition (WidgetCRD, say); callers
// wait until its resource is served.
func CreateCRD(t *testing.T, ctx context.Context, dyn dynamic.Interface, crd *unstructured.Unstructured) {
	t.Helper()
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the CustomResourceDefinition %s: %v", crd.GetName(), err)
	}
}
