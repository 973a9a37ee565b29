package membership

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

// NamespaceNotFoundError reports that the own Lease cannot be created because
// its namespace does not exist. It is not fatal: Run keeps retrying, so a
// replica started before its namespace works once someone creates it, and
// AcquireError returns it meanwhile (the manager serves it on /readyz).
type NamespaceNotFoundError struct {
	Namespace string
	Err       error // the API server's answer
}

func (e *NamespaceNotFoundError) Error() string {
	return fmt.Sprintf("namespace %q not found: create it or set LeaseNamespace (manager.Options) to an existing namespace", e.Namespace)
}

func (e *NamespaceNotFoundError) Unwrap() error { return e.Err }

// ErrNameTaken is wrapped by the error Run returns when the own Lease name
// is used by something that is not a member Lease of this identity (no
// holder of this identity, or no incarnation): another ring or tool.
var ErrNameTaken = errors.New("lease: name taken")

// userInMessage finds the user in an RBAC denial ("User \"x\" cannot get ...").
var userInMessage = regexp.MustCompile(`User "([^"]*)"`)

func newForbiddenError(err error, verb, namespace, name string) *ForbiddenError {
	e := &ForbiddenError{Verb: verb, Namespace: namespace, Name: name, Err: err}
	if m := userInMessage.FindStringSubmatch(err.Error()); m != nil {
		e.User = m[1]
	}
	return e
}

// explainCreateError names the cause of a failed create of the own Lease
// where the API server's answer alone misleads: a NotFound on a create is
// about the namespace, not the Lease.
func explainCreateError(err error, namespace string) error {
	var status apierrors.APIStatus
	if apierrors.IsNotFound(err) && errors.As(err, &status) {
		if d := status.Status().Details; d != nil && d.Kind == "namespaces" {
			return &NamespaceNotFoundError{Namespace: namespace, Err: err}
		}
	}
	return err
}

// isFatal reports whether err must stop Run.
func isFatal(err error) bool {
	var forbidden *ForbiddenError
	return errors.As(err, &forbidden) || errors.Is(err, ErrNameTaken)
}

// errNotOurs: the own Lease now carries a version of another writer that
// the caller has not allowed to be taken over; Run waits for TakeOver.
var errNotOurs = errors.New("lease: the own Lease was written by another process")
