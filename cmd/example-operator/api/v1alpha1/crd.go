package v1alpha1

import _ "embed"

// CRD is the Widget CustomResourceDefinition as YAML, identical to
// deploy/crd.yaml (a test keeps the two equal), for tools that install it:
// the example operator's --install-crd, the demo and the tests.
//
//go:embed crd.yaml
var CRD []byte
