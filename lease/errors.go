package lease

import (
	"errors"
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

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
	var forbidden *ForbiddenError
	return errors.As(err, &forbidden) || errors.Is(err, ErrNameTaken)
}

// ErrNameTaken is wrapped by the error Run returns when the own Lease name
// is used by something that is not a member Lease of this identity (no
// holder of this identity, or no incarnation): another ring or tool.
var ErrNameTaken = errors.New("lease: name taken")

// errNotOurs: the own Lease now carries a version of another writer that
// the caller has not allowed to be taken over; Run waits for TakeOver.
var errNotOurs = errors.New("lease: the own Lease was written by another process")
