package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/controller"
)

// objectKind is the kind of the objects the operator reconciles (--kind):
// ConfigMaps, or BenchObjects, the custom resource of ConfigMap shape.
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
	switch name {
	case "ConfigMap":
		return objectKind{
			example:   &corev1.ConfigMap{},
			newObject: func() controller.Object { return &corev1.ConfigMap{} },
			newList:   func() runtime.Object { return &corev1.ConfigMapList{} },
			data: func(o controller.Object) (map[string]string, bool) {
				cm, ok := o.(*corev1.ConfigMap)
				if !ok {
					return nil, false
				}
				return cm.Data, true
			},
			patch: func(ctx context.Context, namespace, name string, body []byte) error {
				_, err := client.CoreV1().ConfigMaps(namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
				return err
			},
		}, nil
	case "BenchObject":
		c := rest.CopyConfig(cfg)
		c.GroupVersion, c.APIPath = &benchGroupVersion, "/apis"
		c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
		if c.UserAgent == "" {
			c.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		rc, err := rest.RESTClientFor(c)
		if err != nil {
			return objectKind{}, err
		}
		return objectKind{
			example:   &BenchObject{},
			newObject: func() controller.Object { return &BenchObject{} },
			newList:   func() runtime.Object { return &BenchObjectList{} },
			data: func(o controller.Object) (map[string]string, bool) {
				bo, ok := o.(*BenchObject)
				if !ok {
					return nil, false
				}
				return bo.Data, true
			},
			patch: func(ctx context.Context, namespace, name string, body []byte) error {
				return rc.Patch(types.MergePatchType).Namespace(namespace).Resource("benchobjects").Name(name).Body(body).Do(ctx).Error()
			},
		}, nil
	}
	return objectKind{}, fmt.Errorf("--kind %q is neither ConfigMap nor BenchObject", name)
}
