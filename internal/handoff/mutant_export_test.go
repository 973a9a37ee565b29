//go:build mutant_trustwatchorder || mutant_skipdrain || mutant_leavingreleased || mutant_noreadback || mutant_reuseepoch || mutant_voidunconfirmed || mutant_notombstone || mutant_forgetprior || mutant_renewlapse || mutant_noexit || mutant_fencelate || mutant_podgone

package handoff

// MutantName and MutantBug hand the mutant this build carries (the
// mutantName and mutantBug of its _mutant.go file) to TestMutant in the
// external test package. A build with two mutants' tags does not compile.
const (
	MutantName = mutantName
	MutantBug  = mutantBug
)
