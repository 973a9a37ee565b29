package cache

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// customKind stands for a custom resource type: no protobuf encoding.
type customKind struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

func (c *customKind) DeepCopyObject() runtime.Object { out := *c; return &out }

func TestBuiltInKindsAreWatchedAsProtobuf(t *testing.T) {
	for _, tc := range []struct {
		obj  runtime.Object
		want bool
	}{
		{&corev1.ConfigMap{}, true},
		{&coordinationv1.Lease{}, true},
		{&customKind{}, false},
	} {
		if got := speaksProtobuf(tc.obj); got != tc.want {
			t.Errorf("speaksProtobuf(%T) = %v, want %v", tc.obj, got, tc.want)
		}
	}
	c, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Version: "v1"}
	pb, err := c.restClientFor(gv, true)
	if err != nil {
		t.Fatal(err)
	}
	js, err := c.restClientFor(gv, false)
	if err != nil {
		t.Fatal(err)
	}
	if pb == js {
		t.Fatal("protobuf and JSON share one REST client")
	}
}
