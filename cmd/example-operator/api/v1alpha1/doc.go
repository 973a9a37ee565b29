// Package v1alpha1 defines Widget (group demo.kshard.io), the small custom
// resource the example operator reconciles: a spec, a status subresource with
// observedGeneration, and the replica that last reconciled it.
package v1alpha1
