package lease

import (
	"errors"
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ErrLeaseLost is wrapped by the error Run returns when the own Lease was
// deleted by someone other than Delete while this process held it.
var ErrLeaseLost = errors.New("lease: own Lease was deleted while held")

// DuplicateIdentityError is returned by Run when another process writes the
// Lease of this replica's identity: two replicas run with the same identity.
type DuplicateIdentityError struct {
	Namespace, Name, Identity string
	// Incarnation is this process's, Other the one found in the Lease.
	Incarnation, Other string
}

func (e *DuplicateIdentityError) Error() string {
	return fmt.Sprintf("lease: another process (incarnation %q) is writing Lease %s/%s, which this process (incarnation %q) holds for identity %q: "+
		"two replicas run with the same identity; give every replica a unique identity (e.g. from POD_NAME in a StatefulSet). Stopping this replica",
		e.Other, e.Namespace, e.Name, e.Incarnation, e.Identity)
}

// ForbiddenError is returned when the API server refuses a request on Leases:
// the replica's service account lacks RBAC permissions (or the namespace is
// being deleted). It is fatal for Run.
type ForbiddenError struct {
	Verb, Namespace string
	// Name is the Lease's name; empty for list and watch.
	Name string
	// User is the requesting user as the API server names it, when known.
	User string
	Err  error
}

// userInMessage finds the user in an RBAC denial ("User \"x\" cannot get ...").
var userInMessage = regexp.MustCompile(`User "([^"]*)"`)

func newForbiddenError(err error, verb, namespace, name string) *ForbiddenError {
	e := &ForbiddenError{Verb: verb, Namespace: namespace, Name: name, Err: err}
	if m := userInMessage.FindStringSubmatch(err.Error()); m != nil {
		e.User = m[1]
	}
	return e
}

func (e *ForbiddenError) Error() string {
	what := "leases.coordination.k8s.io"
	if e.Name != "" {
		what += fmt.Sprintf(" %q", e.Name)
	}
	as := ""
	if e.User != "" {
		as = fmt.Sprintf(" as %q", e.User)
	}
	if apierrors.HasStatusCause(e.Err, corev1.NamespaceTerminatingCause) {
		return fmt.Sprintf("lease: forbidden to %s %s in namespace %q%s: the namespace is being deleted: %v", e.Verb, what, e.Namespace, as, e.Err)
	}
	return fmt.Sprintf("lease: forbidden to %s %s in namespace %q%s: grant verbs get,list,watch,create,update,delete on leases in this namespace (see deploy/ RBAC): %v",
		e.Verb, what, e.Namespace, as, e.Err)
}

func (e *ForbiddenError) Unwrap() error { return e.Err }

// isFatal reports whether err must stop Run.
func isFatal(err error) bool {
	var dup *DuplicateIdentityError
	var forbidden *ForbiddenError
	return errors.As(err, &dup) || errors.As(err, &forbidden) || errors.Is(err, ErrLeaseLost) || errors.Is(err, errNameTaken)
}

// errNameTaken is wrapped when the own Lease name is used by something that
// is not a member Lease of this ring.
var errNameTaken = errors.New("lease: name taken")
