//go:build kubelete2e

// Command kubelet drives the recorded part of make kubelet-e2e
// (hack/kubelet/recorded.sh): the e2e test operator runs as a StatefulSet on
// the real kubelet, each process recording into a hostPath directory, and
// this program writes its ConfigMaps and checks the records with the test
// kit's checker. Built only with -tags kubelete2e, so `go vet ./...` and
// `go test ./...` (make test) leave it out.
//
//	kubelet write -kubeconfig F -namespace NS -records DIR   until SIGTERM
//	kubelet check -records DIR -within D -await D             exit 1 unless OK
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kshard/kshard/internal/kitwriter"
	"github.com/kshard/kshard/internal/recorder"
)

// objectLabel marks the ConfigMaps the e2e test operator reconciles (its
// labelKey=labelValue).
var objectLabel = map[string]string{"kshard-e2e": "1"}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubelet write|check [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "write":
		err = write(os.Args[2:])
	case "check":
		err = check(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want write or check", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubelet:", err)
		os.Exit(1)
	}
}

// write creates the objects, then updates them at -rate until SIGTERM or
// SIGINT, recording every acknowledged update into -records.
func write(args []string) error {
	fs := flag.NewFlagSet("write", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the node's API server")
	namespace := fs.String("namespace", "kshard-e2e", "namespace of the operator and its ConfigMaps")
	records := fs.String("records", "", "the recorder directory the replicas write into (required)")
	objects := fs.Int("objects", 60, "ConfigMaps to create")
	rate := fs.Float64("rate", 20, "updates per second, round robin")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *records == "" {
		return errors.New("-records is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig %q: %w", *kubeconfig, err)
	}
	// client-go's default of 5 requests a second would cap the writer below
	// -rate (each update is one request, a failed one two).
	cfg.QPS, cfg.Burst = float32(4**rate), int(8**rate)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	names, err := kitwriter.CreateConfigMaps(cctx, client, *namespace, objectLabel, *objects, *records)
	cancel()
	if err != nil {
		return fmt.Errorf("creating %d ConfigMaps in %s: %w", *objects, *namespace, err)
	}
	w, err := kitwriter.Start(client, *namespace, names, *rate, *records)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "writer: %d ConfigMaps created, updating at %.0f/s until SIGTERM\n", len(names), *rate)
	<-ctx.Done()
	writes, failures, lastErr := w.Stop()
	fmt.Fprintf(os.Stderr, "writer: %d updates acknowledged, %d failed (last error: %v)\n", writes, failures, lastErr)
	if writes == 0 {
		return errors.New("no update was acknowledged")
	}
	return nil
}

// check runs the kit's checker over -records with the liveness bound -within.
func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	records := fs.String("records", "", "the recorder directory (required)")
	within := fs.Duration("within", 0, "liveness bound: every update reconciled within this long, faults aside (0: measured, not bounded)")
	await := fs.Duration("await", 30*time.Second, "how long the writer's last updates may take to be reconciled: the records are checked again every second until they show no lost update or this passes (overlaps never go away by waiting)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *records == "" {
		return errors.New("-records is required")
	}
	deadline := time.Now().Add(*await)
	var report recorder.Report
	for {
		var err error
		report, err = recorder.CheckWithin(*records, *within)
		if err != nil {
			return err
		}
		if len(report.Lost) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second) // the replicas write on their own; nothing to wait on but the files
	}
	fmt.Println(report)
	if !report.OK() {
		return errors.New("the records show a violation (above)")
	}
	if report.Completed == 0 || report.Writes == 0 {
		return fmt.Errorf("nothing to check: %d completed reconciles, %d writes", report.Completed, report.Writes)
	}
	return nil
}
