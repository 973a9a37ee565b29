package benchkit

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Object is an object the operators reconcile. It has the method set of
// controller-runtime's client.Object and of kshard's controller.Object,
// so a value of it is one of either.
type Object interface {
	metav1.Object
	runtime.Object
}

// ObjectList is a list of Objects, with the method set of
// controller-runtime's client.ObjectList.
type ObjectList interface {
	metav1.ListInterface
	runtime.Object
}

// Kind is the kind of the objects an operator reconciles (its --kind):
// ConfigMaps, or BenchObjects, the custom resource of ConfigMap shape.
type Kind struct {
	NewObject func() Object
	NewList   func() ObjectList
	// Data returns an object's data, and false for an object of another
	// type.
	Data func(Object) (map[string]string, bool)
}

// KindFor returns --kind's Kind: name is ConfigMap or BenchObject.
func KindFor(name string) (Kind, error) {
	switch name {
	case "ConfigMap":
		return Kind{
			NewObject: func() Object { return &corev1.ConfigMap{} },
			NewList:   func() ObjectList { return &corev1.ConfigMapList{} },
			Data: func(o Object) (map[string]string, bool) {
				cm, ok := o.(*corev1.ConfigMap)
				if !ok {
					return nil, false
				}
				return cm.Data, true
			},
		}, nil
	case "BenchObject":
		return Kind{
			NewObject: func() Object { return &BenchObject{} },
			NewList:   func() ObjectList { return &BenchObjectList{} },
			Data: func(o Object) (map[string]string, bool) {
				bo, ok := o.(*BenchObject)
				if !ok {
					return nil, false
				}
				return bo.Data, true
			},
		}, nil
	}
	return Kind{}, fmt.Errorf("--kind %q is neither ConfigMap nor BenchObject", name)
}
