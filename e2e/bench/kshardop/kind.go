package main

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/e2e/bench/benchkit"
)

// objectKind is the kind of the objects the operator reconciles (--kind):
// benchkit's Kind as kshard's controller takes it, and how to patch one.
type objectKind struct {
	example   controller.Object
	newObject func() controller.Object
	newList   func() runtime.Object
	// data returns an object's data, and false for an object of another
	// type.
	data func(controller.Object) (map[string]string, bool)
	// patch sends a JSON merge patch of one object.
	patch func(ctx context.Context, namespace, name string, body []byte) error
}

// kindFor returns --kind's objectKind; its writes go through client or, for
// BenchObjects, a REST client of cfg (the manager's, fenced as its
// clientset is).
func kindFor(name string, cfg *rest.Config, client kubernetes.Interface, scheme *runtime.Scheme) (objectKind, error) {
	k, err := benchkit.KindFor(name)
	if err != nil {
		return objectKind{}, err
	}
	patch, err := patcherFor(name, cfg, client, scheme)
	if err != nil {
		return objectKind{}, err
	}
	return objectKind{
		example:   k.NewObject(),
		newObject: func() controller.Object { return k.NewObject() },
		newList:   func() runtime.Object { return k.NewList() },
		data:      func(o controller.Object) (map[string]string, bool) { return k.Data(o) },
		patch:     patch,
	}, nil
}

// patcherFor returns how the operator patches an object of kind name.
func patcherFor(name string, cfg *rest.Config, client kubernetes.Interface, scheme *runtime.Scheme) (func(ctx context.Context, namespace, name string, body []byte) error, error) {
	if name == "ConfigMap" {
		return func(ctx context.Context, namespace, name string, body []byte) error {
			_, err := client.CoreV1().ConfigMaps(namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
			return err
		}, nil
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion, c.APIPath = &benchkit.GroupVersion, "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, namespace, name string, body []byte) error {
		return rc.Patch(types.MergePatchType).Namespace(namespace).Resource("benchobjects").Name(name).Body(body).Do(ctx).Error()
	}, nil
}
