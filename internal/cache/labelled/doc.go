// Package labelled is the gate-free sharded informer of one resource, by
// the ring's partition label, on any API server, with its write path: the
// labeller that patches labels, confirming reads and the self-check.
//
// A Labelled is made of label segments (a segmented.Segmented selecting
// "key in (partitions)") and unlabelled views ("key notin (every
// partition)"). The owner of a partition labels its unlabelled objects
// with their request's partition (ObjectClient.PatchLabels); an object that
// leaves every view is served until a live GET confirms it gone. Every
// CheckInterval (DefaultCheckInterval) it checks itself: a paged metadata
// LIST of what it should hold against its stores, reporting objects
// missing for at least an interval (CheckReport) and listing the views
// that missed them again, once. shard/cache builds one per kind cached by
// labels (ModeLabels).
package labelled
