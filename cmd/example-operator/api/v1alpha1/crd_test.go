package v1alpha1

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestEmbeddedCRDMatchesDeploy(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "deploy", "crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, CRD) {
		t.Fatal("cmd/example-operator/api/v1alpha1/crd.yaml differs from deploy/crd.yaml; copy deploy/crd.yaml over it")
	}
}
