package gcp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/memlimit"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// Instance holds a function instance's services, built once and shared by
// its requests. Start builds them ahead of the first request; without it
// the first request builds them.
type Instance struct {
	build func(context.Context) (*Services, error)

	mu  sync.Mutex
	svc *Services
	run *buildRun // the build under way; nil when none is
}

// buildRun is one build of the services; done is closed when it ends.
type buildRun struct {
	done chan struct{}
	svc  *Services
	err  error
}

// NewInstance returns the instance of the process named holder (in
// leases): its services are built from the environment, and once built
// their clients' connections are opened (Services.Warm) while requests
// already use them.
func NewInstance(holder string) *Instance {
	return newInstance(func(ctx context.Context) (*Services, error) {
		env, err := EnvFromOS()
		if err != nil {
			return nil, fmt.Errorf("configuration: %w", err)
		}
		if m := memlimit.Apply(); m.Limit > 0 {
			Logger(env.LogLevel).Info("memory limit", "event", "memory_limit", "limit_mib", m.Limit>>20, "from", m.From, "paced_by_limit", m.PacedByLimit)
		}
		s, err := New(ctx, env, holder)
		if err != nil {
			return nil, err
		}
		go s.Warm(ctx) // owned by the process, which never closes its services
		return s, nil
	})
}

func newInstance(build func(context.Context) (*Services, error)) *Instance {
	return &Instance{build: build}
}

// Start begins building the services in the background unless they are
// built or being built. A function instance calls it as it starts: the
// clients, and the connections Warm opens, are then set up while the
// platform delivers the first request, not after it arrives.
func (in *Instance) Start() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.svc == nil {
		in.startLocked()
	}
}

// startLocked returns the build under way, starting one when none is.
func (in *Instance) startLocked() *buildRun {
	if in.run != nil {
		return in.run
	}
	r := &buildRun{done: make(chan struct{})}
	in.run = r
	go func() {
		// Not the first request's context: its end must not end the
		// clients that later requests share.
		svc, err := in.build(context.Background())
		in.mu.Lock()
		defer in.mu.Unlock()
		r.svc, r.err = svc, err
		if err == nil {
			in.svc = svc
		}
		in.run = nil // a failed build is tried again by the next request
		close(r.done)
	}()
	return r
}

// Services returns the instance's services, waiting for the build under
// way or starting one.
func (in *Instance) Services(ctx context.Context) (*Services, error) {
	in.mu.Lock()
	if svc := in.svc; svc != nil {
		in.mu.Unlock()
		return svc, nil
	}
	r := in.startLocked()
	in.mu.Unlock()
	select {
	case <-r.done:
		return r.svc, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// warmTimeout bounds Warm: a connection that does not open by then is
// opened by the request that needs it.
const warmTimeout = 30 * time.Second

// warmID is the registry record and lake object Warm asks for; neither
// exists, so the answers are empty and nothing is written.
const warmID = "_dsdelta_warm_up"

// Warm opens the connections of the services' Firestore and Cloud Storage
// clients at once, each with one read of something that does not exist
// (a registry record, a lake object): a client connects (and, in the
// cloud, fetches its token) on its first call, and a new table's first
// file otherwise paid for both in turn on its way through staging. It
// logs how long each took and returns when both are done.
func (s *Services) Warm(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, warmTimeout)
	defer cancel()
	start := time.Now()
	var firestoreMs, storageMs int64
	var g errgroup.Group
	g.Go(func() error {
		_, err := s.Registry.File(ctx, warmID)
		firestoreMs = time.Since(start).Milliseconds()
		if errors.Is(err, coord.ErrNotFound) {
			return nil
		}
		return err
	})
	g.Go(func() error {
		_, err := s.Lake.Stat(ctx, warmID)
		storageMs = time.Since(start).Milliseconds()
		if errors.Is(err, objstore.ErrNotExist) {
			return nil
		}
		return err
	})
	if err := g.Wait(); err != nil {
		s.Log().Warn("could not open a client's connection ahead of the requests", "event", "warm_up_failed", "error", err)
		return
	}
	s.Log().Info("clients connected", "event", "warm_up", "firestore_ms", firestoreMs, "storage_ms", storageMs)
}
