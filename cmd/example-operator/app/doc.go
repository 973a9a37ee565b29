// Package app is the example operator: it reconciles Widgets
// (demo.kshard.io/v1alpha1) into owned ConfigMaps, sharded across replicas,
// using only kshard's public API. cmd/example-operator and `kshard demo` run it.
package app
