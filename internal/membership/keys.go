package membership

// Labels, annotations and the finalizer of a member Lease besides
// lease.LabelRing (package lease's doc describes the format).
const (
	LabelState      = "kshard.io/state"
	LabelPartitions = "kshard.io/partitions"

	AnnotationClaim       = "kshard.io/claim"
	AnnotationIncarnation = "kshard.io/incarnation"
	// AnnotationGeneration carries the Record's generation
	// (handoff.Record.Generation). Its key keeps the word epoch, which
	// kshard now uses for the lease validity's epochs only
	// (shard.Validity), because Leases written by earlier versions carry
	// it and a rolling upgrade must read them.
	AnnotationGeneration = "kshard.io/epoch"
	AnnotationParams     = "kshard.io/params"
	// AnnotationPod is the UID of the pod the writer runs in, present
	// when the writer can have its death proven (package lease's proof.go).
	AnnotationPod = "kshard.io/pod-uid"
	// AnnotationWarm is the writer's Record.Warm, encoded like the claim:
	// the partitions of its target its sharded cache holds. Absent on
	// writers with a full cache; advisory, so an undecodable one is read
	// as absent rather than making the Lease malformed.
	AnnotationWarm = "kshard.io/warm"
	// AnnotationWeights is the writer's Record.Weights in a balanced ring:
	// its partitions' object counts, one quantized bucket per partition
	// ("w1:<partitions>:<base64 of the buckets>").
	// Advisory like AnnotationWarm: an undecodable one is read as absent.
	AnnotationWeights = "kshard.io/weights"
	// AnnotationCacheMode and AnnotationCachedObjects are the writer's
	// cache status, written with its renewals: how its cache runs and how
	// many objects it holds, for `kshard status`. Advisory like
	// AnnotationWarm: absent on writers that publish none, and a value
	// that does not parse is read as absent.
	AnnotationCacheMode     = "kshard.io/cache-mode"
	AnnotationCachedObjects = "kshard.io/cached-objects"
	// AnnotationReturning is "true" on the Lease of a writer that keeps
	// its place in the ring for its identity's next incarnation
	// (handoff.Record.Returning): written by a leaver with
	// KeepPlaceOnLeave and by the incarnation that took its Lease over,
	// while it joins. Advisory: any other value is read as absent.
	AnnotationReturning = "kshard.io/returning"

	// FinalizerMember is on every member Lease this version writes: a
	// deletion by hand then leaves the Lease in every view, terminating,
	// until its holder has stopped everything (or a peer found it
	// expired), so a replica that starts later cannot miss a holder still
	// at work, and joins without watching the ring for LeaseDuration first.
	FinalizerMember = "kshard.io/member"
)
