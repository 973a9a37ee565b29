package app

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestEmbeddedCRDMatchesDeploy(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, WidgetCRD) {
		t.Fatal("cmd/example-operator/app/crd.yaml differs from deploy/crd.yaml; copy deploy/crd.yaml over it")
	}
}
