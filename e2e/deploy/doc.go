// Package deploy checks the manifests in the repository's deploy/ folder
// against a real API server: a server-side dry run of the whole kustomization,
// the StatefulSet's pod template admitted under Pod Security "restricted",
// and the RBAC granting the operator's service account what it uses.
package deploy
