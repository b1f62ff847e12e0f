package compact

import (
	"context"
	"errors"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// fakeServices answers MaintainAll with err and counts the rounds.
type fakeServices struct {
	err    error
	rounds int
}

func (f *fakeServices) MaintainAll(context.Context) (pipeline.MaintainAllResult, error) {
	f.rounds++
	return pipeline.MaintainAllResult{}, f.err
}

func tick() event.Event {
	e := event.New()
	e.SetID("1")
	e.SetType("google.cloud.scheduler.job.v1.executed")
	e.SetSource("//cloudscheduler.googleapis.com/projects/p/locations/l/jobs/compact")
	return e
}

func TestHandle(t *testing.T) {
	ctx := context.Background()
	errTable := errors.New("maintain shop.customers: lake unavailable")

	t.Run("a tick runs one maintenance round", func(t *testing.T) {
		f := &fakeServices{}
		h := Handler{Services: func(context.Context) (Services, error) { return f, nil }}
		if err := h.Handle(ctx, tick()); err != nil {
			t.Fatalf("Handle: %v", err)
		}
		if f.rounds != 1 {
			t.Fatalf("%d rounds, want 1", f.rounds)
		}
	})

	t.Run("a round with failures returns them so that the tick is retried", func(t *testing.T) {
		f := &fakeServices{err: errTable}
		h := Handler{Services: func(context.Context) (Services, error) { return f, nil }}
		if err := h.Handle(ctx, tick()); !errors.Is(err, errTable) {
			t.Fatalf("Handle = %v, want the round's error", err)
		}
	})

	t.Run("services that cannot be built fail the tick", func(t *testing.T) {
		h := Handler{Services: func(context.Context) (Services, error) { return nil, errTable }}
		if err := h.Handle(ctx, tick()); !errors.Is(err, errTable) {
			t.Fatalf("Handle = %v, want the build error", err)
		}
	})
}
