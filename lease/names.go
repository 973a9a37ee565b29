package lease

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The names a ring member's Lease is made of are checked here, and only
// here, by every runtime of a ring (this package's Options, kshard's
// manager, the controller-runtime adapter, the kshard CLI):
//
//   - the ring name is the value of the label kshard.io/ring and the prefix
//     of every member's Lease name, so it must be a DNS-1123 label (which
//     is both a valid label value and a valid name prefix);
//   - the identity is the pod's name (proofs of death read the pod by it),
//     the Lease's spec.holderIdentity and the suffix of its name
//     <ring>-<identity>; Kubernetes names pods with DNS-1123 subdomains,
//     and no label value holds the identity, so it must be a DNS-1123
//     subdomain and <ring>-<identity> one too (at most 253 characters);
//   - the namespace is a namespace's name, a DNS-1123 label.

// ValidateRing reports why ring cannot name a ring; nil if it can. The error
// starts with the name, for the caller to prefix with its option's name.
func ValidateRing(ring string) error {
	if ring == "" {
		return errors.New("is empty: name the ring; every replica of the operator uses the same name")
	}
	if msgs := validation.IsDNS1123Label(ring); len(msgs) > 0 {
		return fmt.Errorf("%q is not a DNS-1123 label (%s): it is the value of the label %s and the prefix of every member's Lease name",
			ring, strings.Join(msgs, "; "), LabelRing)
	}
	return nil
}

// ValidateIdentity reports why identity cannot name a member of ring; nil
// if it can. The Lease name is checked only when ring itself is valid
// (ValidateRing reports that). The error starts with the identity.
func ValidateIdentity(ring, identity string) error {
	if identity == "" {
		return fmt.Errorf("is empty: set it to the pod's name ($%s from the downward API, fieldRef metadata.name)", EnvPodName)
	}
	if msgs := validation.IsDNS1123Subdomain(identity); len(msgs) > 0 {
		return fmt.Errorf("%q is not a DNS-1123 subdomain (%s): use the pod's name ($%s)", identity, strings.Join(msgs, "; "), EnvPodName)
	}
	if ValidateRing(ring) != nil {
		return nil
	}
	if name := LeaseName(ring, identity); len(validation.IsDNS1123Subdomain(name)) > 0 {
		return fmt.Errorf("%q makes the Lease name %q (<ring>-<identity>), which is not a valid object name (%s): shorten the ring name or the identity",
			identity, name, strings.Join(validation.IsDNS1123Subdomain(name), "; "))
	}
	return nil
}

// ValidateNamespace reports why namespace cannot hold a ring's Leases; nil
// if it can. The error starts with the namespace.
func ValidateNamespace(namespace string) error {
	if namespace == "" {
		return fmt.Errorf("is empty: name the namespace of the ring's Leases (the operator's own, usually; $%s from the downward API)", EnvPodNamespace)
	}
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		return fmt.Errorf("%q is not a namespace name (%s)", namespace, strings.Join(msgs, "; "))
	}
	return nil
}
