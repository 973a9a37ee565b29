//go:build !mutant_podgone

package handoff

// otherPodProves reports whether pod, as read, proves that d.Incarnation
// has ended although it is not the pod d recorded: it is gone, or was
// recreated under the same name (another UID). Never: a force delete, or
// the pod garbage collector after a node is lost, removes pods whose
// containers may still run. podproof_mutant.go, built only with the tag
// mutant_podgone, takes such a pod for proof, to show that the simulation
// catches it.
func otherPodProves(d Death, pod PodRead) bool {
	return false
}
