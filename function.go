package dsdelta

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"

	"github.com/dsdelta/dsdelta/functions/compact"
	"github.com/dsdelta/dsdelta/functions/merge"
	"github.com/dsdelta/dsdelta/functions/onfile"
	"github.com/dsdelta/dsdelta/shared/gcp"
)

// entryPoints are the functions the package registers.
var entryPoints = []string{"OnFile", "Merge", "Compact"}

func init() {
	// One set of clients per instance, shared by whichever entry point
	// the instance serves. An instance started to serve one of them (the
	// platform names it in FUNCTION_TARGET) builds them and opens their
	// connections as it starts, while its first request is on the way;
	// otherwise (a test, a program that only links the package) the first
	// request builds them.
	host, _ := os.Hostname()
	in := gcp.NewInstance(fmt.Sprintf("%s-%s-%d", os.Getenv("K_SERVICE"), host, os.Getpid()))
	if slices.Contains(entryPoints, os.Getenv("FUNCTION_TARGET")) {
		in.Start()
	}
	svc := in.Services
	// Each handler asks for the interface it uses, which *gcp.Services
	// provides; a handler reads the services only when err is nil.
	functions.CloudEvent("OnFile", onfile.Handler{Services: func(ctx context.Context) (onfile.Services, error) { return svc(ctx) }}.Handle)
	functions.CloudEvent("Merge", merge.Handler{Services: func(ctx context.Context) (merge.Services, error) { return svc(ctx) }}.Handle)
	functions.CloudEvent("Compact", compact.Handler{Services: func(ctx context.Context) (compact.Services, error) { return svc(ctx) }}.Handle)
}
