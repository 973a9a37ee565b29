// Package deploy checks the manifests in the repository's deploy/ folder
// against a real API server: a server-side dry run of the whole kustomization,
// and the StatefulSet's pod template admitted under Pod Security "restricted".
package deploy
