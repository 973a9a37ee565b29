// Package controllertest holds test doubles for kshard's own tests of
// package controller: an in-memory Informers whose objects a test adds,
// updates and deletes, and a Manager that records the runnables
// (controllers) added to it and can start them. No API server is involved.
package controllertest
