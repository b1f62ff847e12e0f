package gcp

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestInstanceBuildsItsServicesOnce: a function instance's services are
// built ahead of its first request when it starts, once however many
// requests ask for them, and a failed build is tried again by the next
// request instead of failing the instance for good.
func TestInstanceBuildsItsServicesOnce(t *testing.T) {
	t.Run("Start builds the services before any request asks for them", func(t *testing.T) {
		built := make(chan struct{})
		want := &Services{}
		in := newInstance(func(context.Context) (*Services, error) {
			close(built)
			return want, nil
		})
		in.Start()
		select {
		case <-built:
		case <-time.After(10 * time.Second):
			t.Fatal("Start did not build the services: the first request would build them")
		}
		got, err := in.Services(context.Background())
		if err != nil || got != want {
			t.Fatalf("Services = %p, %v; want the services Start built", got, err)
		}
	})
	t.Run("requests during the build wait for it and share its services", func(t *testing.T) {
		release := make(chan struct{})
		var builds atomic.Int32
		want := &Services{}
		in := newInstance(func(context.Context) (*Services, error) {
			builds.Add(1)
			<-release
			return want, nil
		})
		in.Start()
		var wg sync.WaitGroup
		got := make([]*Services, 8)
		for i := range got {
			wg.Go(func() {
				s, err := in.Services(context.Background())
				if err != nil {
					t.Error(err)
				}
				got[i] = s
			})
		}
		close(release)
		wg.Wait()
		in.Start() // built: nothing more to do
		for i, s := range got {
			if s != want {
				t.Errorf("request %d got %p, want %p", i, s, want)
			}
		}
		if n := builds.Load(); n != 1 {
			t.Errorf("%d builds, want 1", n)
		}
	})
	t.Run("a failed build is tried again by the next request", func(t *testing.T) {
		var builds atomic.Int32
		want := &Services{}
		in := newInstance(func(context.Context) (*Services, error) {
			if builds.Add(1) == 1 {
				return nil, errors.New("firestore unreachable")
			}
			return want, nil
		})
		if _, err := in.Services(context.Background()); err == nil {
			t.Fatal("the first build failed, yet Services returned no error")
		}
		if got, err := in.Services(context.Background()); err != nil || got != want {
			t.Fatalf("second request: %p, %v; want the services of a second build", got, err)
		}
	})
	t.Run("a request that ends while the build runs returns, and the build goes on for the next", func(t *testing.T) {
		release := make(chan struct{})
		want := &Services{}
		in := newInstance(func(ctx context.Context) (*Services, error) {
			<-release
			// The build's context is not the request's.
			return want, ctx.Err()
		})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := in.Services(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want the request's context.Canceled", err)
		}
		close(release)
		if got, err := in.Services(context.Background()); err != nil || got != want {
			t.Fatalf("next request: %p, %v; want the services of the build the first one started", got, err)
		}
	})
}
