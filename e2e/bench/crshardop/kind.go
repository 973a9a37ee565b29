package main

// This file is identical in e2e/bench/baseline and e2e/bench/crshardop
// (TestOperatorCopiesAgree in e2e/bench keeps them equal).

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// objectKind is the kind of the objects the operator reconciles (--kind):
// ConfigMaps, or BenchObjects, the custom resource of ConfigMap shape.
type objectKind struct {
	newObject func() client.Object
	newList   func() client.ObjectList
	// data returns an object's data, and false for an object of another
	// type.
	data func(client.Object) (map[string]string, bool)
}

// kindFor returns --kind's objectKind.
func kindFor(name string) (objectKind, error) {
	switch name {
	case "ConfigMap":
		return objectKind{
			newObject: func() client.Object { return &corev1.ConfigMap{} },
			newList:   func() client.ObjectList { return &corev1.ConfigMapList{} },
			data: func(o client.Object) (map[string]string, bool) {
				cm, ok := o.(*corev1.ConfigMap)
				if !ok {
					return nil, false
				}
				return cm.Data, true
			},
		}, nil
	case "BenchObject":
		return objectKind{
			newObject: func() client.Object { return &BenchObject{} },
			newList:   func() client.ObjectList { return &BenchObjectList{} },
			data: func(o client.Object) (map[string]string, bool) {
				bo, ok := o.(*BenchObject)
				if !ok {
					return nil, false
				}
				return bo.Data, true
			},
		}, nil
	}
	return objectKind{}, fmt.Errorf("--kind %q is neither ConfigMap nor BenchObject", name)
}
