// Package kubebuilder holds a small operator in kubebuilder's layout, twice:
// baseline/ is the leader-elected operator as `kubebuilder init` and
// `kubebuilder create api` shape it (cmd/main.go, and a reconciler with
// SetupWithManager per kind in internal/controller), and converted/ is the
// same operator converted to kshard's controller-runtime adapter the way
// docs/adapter.md documents for that layout. Their Go files differ only by
// the conversion, so
//
//	git diff --no-index --numstat e2e/bench/crshardop/kubebuilder/baseline e2e/bench/crshardop/kubebuilder/converted
//
// counts it (TestKubebuilderConversionStaysSmall, and the benchmark's
// changed_lines_kubebuilder). The two copies live in one module, so
// cmd/main.go's import of its internal/controller package names a different
// path in each: two of the counted lines, which a project converted in
// place does not change.
//
// The operator keeps a digest of labelled ConfigMaps and rolls the
// Deployments that use them: the ConfigMap controller writes each
// ConfigMap labelled digest.example.com/enabled=true a Secret
// <name>-digest holding the SHA-256 of its data, owned by the ConfigMap;
// the Deployment controller copies that digest into the pod template of
// every Deployment annotated digest.example.com/configmap=<name>, watching
// the Secrets to do so. It uses built-in kinds only, so it needs no CRD.
package kubebuilder
