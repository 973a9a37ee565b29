package lease

// Proof of death: each process writes a marker of its incarnation into its
// container's termination message file at start and records its pod's UID
// in its Lease (annotation kshard.io/pod-uid); when the container ends, the kubelet copies
// the file into the container's terminated state in the pod's status, where
// a peer reads it to take the Lease over without waiting for it to expire.

// DefaultTerminationMessagePath is where Kubernetes mounts a container's
// termination message file unless the container's terminationMessagePath
// says otherwise.
const DefaultTerminationMessagePath = "/dev/termination-log"
