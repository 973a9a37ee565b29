package labelled

import (
	"context"
	"encoding/json"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/shard"
)

// ObjectClient is what a Labelled needs of the API server besides list and
// watch: a live read of one object (to tell an object that left a label
// selector from a deleted one) and a patch of its partition label.
type ObjectClient interface {
	// Get reads the object namespace/name from the API server (not a
	// cache), decoded as the kind's cached type. A missing object is an
	// apierrors NotFound error.
	Get(ctx context.Context, namespace, name string) (runtime.Object, error)
	// PatchLabels merges labels into the object's metadata.labels (a JSON
	// merge patch of metadata only) and returns the object's new
	// resourceVersion.
	PatchLabels(ctx context.Context, namespace, name string, labels map[string]string) (resourceVersion string, err error)
}

// requestPartition returns the partition of the request obj maps to under
// route: its own key's, or (RouteOwner) its controller owner's — an owner
// lives in the object's namespace, so the owner's key is the namespace and
// the owner reference's name. ok is false for an object without metadata.
func requestPartition(p shard.Partitioner, route shard.Route, obj any) (int, bool) {
	if d, isDeleted := obj.(toolscache.DeletedFinalStateUnknown); isDeleted {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return -1, false
	}
	name := m.GetName()
	if route == shard.RouteOwner {
		if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
			name = ref.Name
		}
	}
	return p.Partition(shard.KeyOf(m.GetNamespace(), name)), true
}

// labelPatch is the JSON merge patch that sets labels and nothing else.
func labelPatch(labels map[string]string) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
}

// StripManagedFields is the informers' transform of a sharded cache:
// metadata.managedFields are often a third of an object's size and
// reconcilers read them rarely (they write with server-side apply, which
// the API server tracks), so every cached object costs less without them.
func StripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// LabelFieldManager is the field manager of the cache's label patches, as
// an object's metadata.managedFields names it (client-go's default is the
// program's name, "Go-http-client" for most).
const LabelFieldManager = "kshard"

// NewObjectClient returns the ObjectClient of a Labelled: reads through
// get (typed, metadata-only or unstructured, as the kind is cached), label
// patches through writer, a metadata client of the kind's resource, as
// LabelFieldManager.
func NewObjectClient(get func(ctx context.Context, namespace, name string) (runtime.Object, error), writer metadata.Getter) ObjectClient {
	return objectClient{get: get, writer: writer}
}

// objectClient is NewObjectClient's.
type objectClient struct {
	get    func(ctx context.Context, namespace, name string) (runtime.Object, error)
	writer metadata.Getter
}

func (o objectClient) Get(ctx context.Context, namespace, name string) (runtime.Object, error) {
	return o.get(ctx, namespace, name)
}

func (o objectClient) PatchLabels(ctx context.Context, namespace, name string, labels map[string]string) (string, error) {
	patch, err := labelPatch(labels)
	if err != nil {
		return "", err
	}
	got, err := o.writer.Namespace(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: LabelFieldManager})
	if err != nil {
		return "", err
	}
	return got.ResourceVersion, nil
}
