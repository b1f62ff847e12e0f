package dsdelta

import (
	"context"
	"fmt"
	"os"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"

	"github.com/dsdelta/dsdelta/functions/compact"
	"github.com/dsdelta/dsdelta/functions/merge"
	"github.com/dsdelta/dsdelta/functions/onfile"
	"github.com/dsdelta/dsdelta/shared/gcp"
)

func init() {
	// One lazily built set of clients per instance, shared by whichever
	// entry point the instance serves.
	host, _ := os.Hostname()
	svc := gcp.Lazy(fmt.Sprintf("%s-%s-%d", os.Getenv("K_SERVICE"), host, os.Getpid()))
	// Each handler asks for the interface it uses, which *gcp.Services
	// provides; a handler reads the services only when err is nil.
	functions.CloudEvent("OnFile", onfile.Handler{Services: func(ctx context.Context) (onfile.Services, error) { return svc(ctx) }}.Handle)
	functions.CloudEvent("Merge", merge.Handler{Services: func(ctx context.Context) (merge.Services, error) { return svc(ctx) }}.Handle)
	functions.CloudEvent("Compact", compact.Handler{Services: func(ctx context.Context) (compact.Services, error) { return svc(ctx) }}.Handle)
}
