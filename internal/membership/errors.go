package membership

import (
	"errors"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kshard/kshard/lease"
)

// userInMessage finds the user in an RBAC denial ("User \"x\" cannot get ...").
var userInMessage = regexp.MustCompile(`User "([^"]*)"`)

func newForbiddenError(err error, verb, namespace, name string) *lease.ForbiddenError {
	e := &lease.ForbiddenError{Verb: verb, Namespace: namespace, Name: name, Err: err}
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
			return &lease.NamespaceNotFoundError{Namespace: namespace, Err: err}
		}
	}
	return err
}

// isFatal reports whether err must stop Run.
func isFatal(err error) bool {
	var forbidden *lease.ForbiddenError
	return errors.As(err, &forbidden) || errors.Is(err, lease.ErrNameTaken)
}

// errNotOurs: the own Lease now carries a version of another writer that
// the caller has not allowed to be taken over; Run waits for TakeOver.
var errNotOurs = errors.New("lease: the own Lease was written by another process")
