// Package cachekit holds the small pieces kshard's sharded informers share
// (internal/cache/segmented and internal/cache/labelled): paged LISTs, the
// read-only store of a merged view, selector and resourceVersion helpers.
package cachekit
