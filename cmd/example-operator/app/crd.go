package app

import _ "embed"

// WidgetCRD is the Widget CustomResourceDefinition as YAML, identical to
// deploy/crd.yaml (a test keeps the two equal), for tools that install it.
//
//go:embed crd.yaml
var WidgetCRD []byte
