package onfile

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/gcp"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// fakeServices records what the handler asks of it.
type fakeServices struct {
	stageRes pipeline.StageResult
	stageErr error
	outside  bool // InSource answers false
	deadErr  error
	staged   []datastream.SourceFile
	dead     []gcp.DeadLetter
}

func (f *fakeServices) Stage(_ context.Context, sf datastream.SourceFile) (pipeline.StageResult, error) {
	f.staged = append(f.staged, sf)
	return f.stageRes, f.stageErr
}

func (f *fakeServices) InSource(string, string) bool { return !f.outside }

func (f *fakeServices) PublishDeadLetter(_ context.Context, d gcp.DeadLetter) error {
	f.dead = append(f.dead, d)
	return f.deadErr
}

func (f *fakeServices) Log() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func (f *fakeServices) handler() Handler {
	return Handler{Services: func(context.Context) (Services, error) { return f, nil }}
}

// finalized is an Eventarc object-finalized event of the object.
func finalized(t *testing.T, data string) event.Event {
	t.Helper()
	e := event.New()
	e.SetID("1")
	e.SetType("google.cloud.storage.object.v1.finalized")
	e.SetSource("//storage.googleapis.com/projects/_/buckets/src")
	if err := e.SetData("application/json", []byte(data)); err != nil {
		t.Fatal(err)
	}
	return e
}

const object = `{"bucket":"src","name":"shop_customers/2026/01/05/10/00/f.jsonl","generation":"7","size":"42"}`

func TestHandle(t *testing.T) {
	ctx := context.Background()
	errTransient := errors.New("lake unavailable")

	t.Run("a notification of a source file stages it and publishes nothing", func(t *testing.T) {
		f := &fakeServices{stageRes: pipeline.StageResult{Table: "shop.customers", Events: 3}}
		if err := f.handler().Handle(ctx, finalized(t, object)); err != nil {
			t.Fatalf("Handle: %v", err)
		}
		if len(f.staged) != 1 || f.staged[0].Bucket != "src" || f.staged[0].Name != "shop_customers/2026/01/05/10/00/f.jsonl" || f.staged[0].Generation != 7 {
			t.Fatalf("staged %+v, want the notified object once", f.staged)
		}
		if len(f.dead) != 0 {
			t.Fatalf("dead letters %+v for a good file", f.dead)
		}
	})

	t.Run("a quarantined file is acknowledged with a dead letter naming it and the reason", func(t *testing.T) {
		f := &fakeServices{stageRes: pipeline.StageResult{Table: "shop.customers", Quarantined: "record 3: bad JSON"}}
		if err := f.handler().Handle(ctx, finalized(t, object)); err != nil {
			t.Fatalf("Handle: %v", err)
		}
		want := gcp.DeadLetter{Bucket: "src", Name: "shop_customers/2026/01/05/10/00/f.jsonl", Generation: 7, Table: "shop.customers", Reason: "record 3: bad JSON"}
		if len(f.dead) != 1 || f.dead[0] != want {
			t.Fatalf("dead letters %+v, want [%+v]", f.dead, want)
		}
	})

	t.Run("a dead letter that cannot be published is retried", func(t *testing.T) {
		f := &fakeServices{stageRes: pipeline.StageResult{Table: "shop.customers", Quarantined: "bad"}, deadErr: errTransient}
		if err := f.handler().Handle(ctx, finalized(t, object)); !errors.Is(err, errTransient) {
			t.Fatalf("Handle = %v, want the publish error so that the platform retries", err)
		}
	})

	t.Run("a failure to stage is returned so that the platform retries", func(t *testing.T) {
		f := &fakeServices{stageErr: errTransient}
		if err := f.handler().Handle(ctx, finalized(t, object)); !errors.Is(err, errTransient) {
			t.Fatalf("Handle = %v, want the staging error", err)
		}
		if len(f.dead) != 0 {
			t.Fatalf("dead letters %+v for a transient failure", f.dead)
		}
	})

	t.Run("a skipped or duplicate file is acknowledged without a dead letter", func(t *testing.T) {
		for _, res := range []pipeline.StageResult{{Skipped: "not a data file"}, {Table: "shop.customers", Duplicate: true}} {
			f := &fakeServices{stageRes: res}
			if err := f.handler().Handle(ctx, finalized(t, object)); err != nil || len(f.dead) != 0 {
				t.Fatalf("%+v: Handle = %v with dead letters %+v, want nil and none", res, err, f.dead)
			}
		}
	})

	t.Run("an object outside the configured source is ignored", func(t *testing.T) {
		f := &fakeServices{outside: true}
		if err := f.handler().Handle(ctx, finalized(t, object)); err != nil {
			t.Fatalf("Handle: %v", err)
		}
		if len(f.staged) != 0 || len(f.dead) != 0 {
			t.Fatalf("staged %+v and dead letters %+v for an object outside the source", f.staged, f.dead)
		}
	})

	t.Run("a malformed notification is acknowledged with a dead letter and stages nothing", func(t *testing.T) {
		f := &fakeServices{}
		if err := f.handler().Handle(ctx, finalized(t, `{"bucket":"src"}`)); err != nil {
			t.Fatalf("Handle: %v", err)
		}
		if len(f.staged) != 0 || len(f.dead) != 1 || f.dead[0].Reason == "" {
			t.Fatalf("staged %+v, dead letters %+v; want none staged and one dead letter with a reason", f.staged, f.dead)
		}
	})

	t.Run("services that cannot be built fail the event so that it is retried", func(t *testing.T) {
		h := Handler{Services: func(context.Context) (Services, error) { return nil, errTransient }}
		if err := h.Handle(ctx, finalized(t, object)); !errors.Is(err, errTransient) {
			t.Fatalf("Handle = %v, want the build error", err)
		}
	})
}
