// Command image builds the example operator's container image without a
// container daemon and without pulling a base image: the statically linked
// binary in one layer on an empty (scratch) base, run as the non-root user
// 65532. It writes the image twice under -out:
//
//	oci/                   an OCI image layout (skopeo, crane, containerd, podman)
//	example-operator.tar   a `docker load` / `podman load` archive
//
// Run it from the repository with `make image`. It is a module of its own so
// that go-containerregistry stays out of kshard's root go.mod; it builds the
// operator by running `go build` in the checkout, not by importing kshard.
//
// hack/image/Dockerfile builds the same image for people with Docker.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultRef is the image reference the build is tagged with by default,
// and the one deploy/statefulset.yaml runs (a test keeps them equal).
const DefaultRef = "ghcr.io/kshard/example-operator:v0.1.0"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	opts := Options{}
	fs.StringVar(&opts.Root, "root", ".", "the kshard checkout (the directory holding its go.mod)")
	fs.StringVar(&opts.Out, "out", "", "output directory, default ROOT/_output/image; its oci/ and example-operator.tar are replaced")
	fs.StringVar(&opts.Ref, "ref", DefaultRef, "image reference to tag the build with")
	fs.StringVar(&opts.Arch, "arch", runtime.GOARCH, "GOARCH of the image (linux only)")
	fs.StringVar(&opts.Binary, "binary", "", "package this prebuilt linux/ARCH example-operator instead of building one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: every input is a flag (see -help)", fs.Args())
	}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds since 1970: %w", s, err)
		}
		opts.Created = time.Unix(sec, 0).UTC()
	}
	res, err := Build(ctx, opts)
	if err != nil {
		return err
	}
	oci, tar := relToCwd(res.Layout), relToCwd(res.Tarball)
	fmt.Fprintf(out, "built %s (linux/%s, %s)\n", res.Ref, opts.arch(), res.Digest)
	fmt.Fprintf(out, "  OCI layout: %s\n", res.Layout)
	fmt.Fprintf(out, "  archive:    %s\n", res.Tarball)
	fmt.Fprintf(out, "load it:  docker load -i %s   (or podman load -i …)\n", tar)
	fmt.Fprintf(out, "push it:  skopeo copy oci:%s:%s docker://%s   (or crane push %s %s)\n", oci, res.Tag, res.Ref, tar, res.Ref)
	return nil
}

// relToCwd shortens path for the printed commands when it is below the
// working directory.
func relToCwd(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}
