package crshard

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// metaItems returns the object metadata of every item of list.
func metaItems(list client.ObjectList) ([]metav1.Object, error) {
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("reading the items of %T: %w", list, err)
	}
	out := make([]metav1.Object, 0, len(objs))
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			return nil, fmt.Errorf("an item of %T has no object metadata: %w", list, err)
		}
		out = append(out, m)
	}
	return out, nil
}
