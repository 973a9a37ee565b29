// Package faultproxy is a loopback TCP proxy that passes, delays or
// blackholes the traffic of one client, so a test can partition one replica
// from the API server while its peers keep working; TLS passes through it.
package faultproxy
