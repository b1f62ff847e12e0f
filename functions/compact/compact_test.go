package compact

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// fakeServices answers MaintainAll with err and Reconcile with
// reconcileErr, and counts the calls of each.
type fakeServices struct {
	err, reconcileErr error
	rounds, ticks     int
}

func (f *fakeServices) MaintainAll(context.Context) (pipeline.MaintainAllResult, error) {
	f.rounds++
	return pipeline.MaintainAllResult{}, f.err
}

func (f *fakeServices) Reconcile(context.Context) (pipeline.ReconcileResult, error) {
	f.ticks++
	return pipeline.ReconcileResult{}, f.reconcileErr
}

func (f *fakeServices) Log() *slog.Logger { return slog.New(slog.DiscardHandler) }

// pushed is a tick as the scheduler's topic pushes it, with body as the
// message's data.
func pushed(t *testing.T, body string) event.Event {
	e := tick()
	env := map[string]any{"message": map[string]any{"data": base64.StdEncoding.EncodeToString([]byte(body)), "messageId": "1"}, "subscription": "s"}
	if err := e.SetData("application/json", env); err != nil {
		t.Fatal(err)
	}
	return e
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

	t.Run("a tick runs one reconcile and one maintenance round", func(t *testing.T) {
		f := &fakeServices{}
		h := Handler{Services: func(context.Context) (Services, error) { return f, nil }}
		if err := h.Handle(ctx, tick()); err != nil {
			t.Fatalf("Handle: %v", err)
		}
		if f.rounds != 1 || f.ticks != 1 {
			t.Fatalf("%d rounds and %d reconciles, want 1 and 1", f.rounds, f.ticks)
		}
	})

	for _, tc := range []struct {
		name, body         string
		reconciles, rounds int
	}{
		{"the compaction schedule's message {} runs both", "{}", 1, 1},
		{"the reconcile schedule's message runs only the reconcile", `{"tasks":["reconcile"]}`, 1, 0},
		{"a message naming maintain runs only maintenance", `{"tasks":["maintain"]}`, 0, 1},
		{"an unreadable message runs both rather than nothing", `{"tasks":["defrag"]}`, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeServices{}
			h := Handler{Services: func(context.Context) (Services, error) { return f, nil }}
			if err := h.Handle(ctx, pushed(t, tc.body)); err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if f.ticks != tc.reconciles || f.rounds != tc.rounds {
				t.Fatalf("%d reconciles and %d rounds, want %d and %d", f.ticks, f.rounds, tc.reconciles, tc.rounds)
			}
		})
	}

	t.Run("a failed reconcile still maintains, and fails the tick", func(t *testing.T) {
		f := &fakeServices{reconcileErr: errTable}
		h := Handler{Services: func(context.Context) (Services, error) { return f, nil }}
		if err := h.Handle(ctx, tick()); !errors.Is(err, errTable) || f.rounds != 1 {
			t.Fatalf("Handle = %v after %d rounds, want the reconcile's error after 1", err, f.rounds)
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
