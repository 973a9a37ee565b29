//go:build mutant_podgone

package handoff

// The mutant core that judges a peer dead without proof (built only with
// the tag mutant_podgone; podproof.go is the product's): ProvesDeath takes
// a pod that is gone or recreated under the same name for proof that the
// incarnation d names has ended, as if the force delete or the pod garbage
// collector had stopped its process, which may run on, cut off on a lost
// node. Defence removed: only the kubelet's report, in the pod the Lease
// recorded, of a terminated container with the incarnation's marker proves
// a death.
func otherPodProves(d Death, pod PodRead) bool {
	return true
}

// mutantName and mutantBug name this build's broken core and the bug it
// models, for TestMutant (mutants_test.go), which only a build with one
// mutant's tag compiles.
const (
	mutantName = "podgone"
	mutantBug  = "a pod that is gone or recreated under its name counts as proof that its process ended"
)
