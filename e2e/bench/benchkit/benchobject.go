package benchkit

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of BenchObject, the custom
// resource the benchmark installs (e2e/bench/benchobject-crd.yaml).
var GroupVersion = schema.GroupVersion{Group: "bench.kshard.io", Version: "v1"}

// BenchObject is a ConfigMap's shape — metadata and a string map called
// data — in a kind of its own: the operators reconcile it with the same
// code, and the harness writes it with the same patches, as a ConfigMap.
// A custom resource is stored and served as JSON and is filtered by no
// shard selector echo, which is why it is measured apart.
type BenchObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Data              map[string]string `json:"data,omitempty"`
}

// BenchObjectList is a list of BenchObjects.
type BenchObjectList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BenchObject `json:"items"`
}

// AddToScheme registers BenchObject and BenchObjectList in s.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &BenchObject{}, &BenchObjectList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// DeepCopyInto copies o into out.
func (o *BenchObject) DeepCopyInto(out *BenchObject) {
	*out = *o
	o.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if o.Data != nil {
		out.Data = make(map[string]string, len(o.Data))
		for k, v := range o.Data {
			out.Data[k] = v
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (o *BenchObject) DeepCopyObject() runtime.Object {
	if o == nil {
		return nil
	}
	out := new(BenchObject)
	o.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *BenchObjectList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &BenchObjectList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]BenchObject, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}
