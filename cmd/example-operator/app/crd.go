package app

import (
	"bytes"
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/cmd/example-operator/api/v1alpha1"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRD creates the Widget CRD (--install-crd); one that exists already
// is left as it is.
func installCRD(ctx context.Context, cfg *rest.Config) error {
	crd := &unstructured.Unstructured{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(v1alpha1.CRD), 4096).Decode(&crd.Object); err != nil {
		return fmt.Errorf("decoding the embedded Widget CRD: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{})
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsForbidden(err):
		return fmt.Errorf("--install-crd: not allowed to create CustomResourceDefinitions (%v): apply deploy/crd.yaml as a cluster admin instead", err)
	default:
		return fmt.Errorf("--install-crd: creating the Widget CRD: %w", err)
	}
}
